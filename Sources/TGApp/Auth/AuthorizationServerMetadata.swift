import HTTPTypes
import TGAuth
import TGHTTPServer

/// `GET /.well-known/oauth-authorization-server` (RFC 8414): TokenGate as the authorization
/// server of the apps, so AppAuth and other standard clients configure themselves.
enum AuthorizationServerMetadata {
    static func add(to router: inout Router, issuer: String, dpopAlgorithms: [String]) {
        let document: [String: Any] = [
            "issuer": issuer,
            "authorization_endpoint": issuer + "/auth/login",
            "token_endpoint": issuer + "/auth/token",
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token", TokenExchangeRequest.grantType, TransferRedemption.grantType],
            // RFC 9449 §5.1: the proofs TokenGate checks, for the apps configured with dpop.
            "dpop_signing_alg_values_supported": dpopAlgorithms,
            "code_challenge_methods_supported": ["S256"],
            // Apps are public clients: PKCE, not a secret, proves them.
            "token_endpoint_auth_methods_supported": ["none"],
            "authorization_response_iss_parameter_supported": true,
            "service_documentation": issuer + "/openapi.yaml",
        ]
        let response = ServerResponse(
            status: .ok,
            contentType: "application/json",
            body: JSON.encode(document),
            headerFields: [.cacheControl: "public, max-age=3600"]
        )
        router.add(.get, "/.well-known/oauth-authorization-server", .sync { _, _ in response })
    }
}
