import Foundation
import TokenGateClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The browser of the example: follows the sign-in's redirects without a window, and signs in at
/// the development provider (oidc-provider-mock) by posting its one-field form, `sub=<user>`.
/// Only for `make dev`'s provider: a real provider's login page needs a real browser
/// (`WebAuthenticationBrowserSession` on iOS and macOS).
final class DevProviderBrowser: BrowserSession {
    let user: String
    /// The library's transport: it hands every redirect back instead of following it.
    let transport = URLSessionTransport(configuration: .ephemeral)

    init(user: String) {
        self.user = user
    }

    func authenticate(at url: URL, callbackScheme: String, ephemeral: Bool) async throws -> URL {
        var next = URLRequest(url: url)
        for _ in 0..<8 {
            let (_, http) = try await transport.send(next)
            if http.statusCode == 200, next.httpMethod != "POST", let page = next.url {
                // The provider's login page: its form posts `sub` back to the same URL.
                next = URLRequest(url: page)
                next.httpMethod = "POST"
                next.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
                next.httpBody = Data("sub=\(user)".utf8)
                continue
            }
            guard let location = http.value(forHTTPHeaderField: "Location") else { throw TokenGateClientError.cancelled }
            if location.hasPrefix(callbackScheme + ":") { return URL(string: location)! }
            guard let target = URL(string: location, relativeTo: next.url) else { throw TokenGateClientError.cancelled }
            next = URLRequest(url: target.absoluteURL)
        }
        throw TokenGateClientError.cancelled
    }
}
