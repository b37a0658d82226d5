import HTTPTypes
import TGHTTPServer

/// `GET /openapi.yaml`: the OpenAPI description of this build's API, compiled into the binary from
/// the repository's `openapi.yaml`, so it always matches the version that serves it.
public enum APIDescriptionRoute {
    static let document = PackageResources.openapi_yaml

    public static func add(to router: inout Router) {
        let response = ServerResponse(
            status: .ok,
            headerFields: [.contentType: "application/yaml; charset=utf-8", .cacheControl: "no-cache"],
            body: .bytes(document)
        )
        router.add(.get, "/openapi.yaml", .sync { _, _ in response })
    }
}
