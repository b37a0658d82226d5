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
    let session: URLSession

    init(user: String) {
        self.user = user
        session = URLSession(configuration: .ephemeral, delegate: NoRedirects(), delegateQueue: nil)
    }

    func authenticate(at url: URL, callbackScheme: String, ephemeral: Bool) async throws -> URL {
        var next = URLRequest(url: url)
        for _ in 0..<8 {
            let (_, response) = try await session.data(for: next)
            guard let http = response as? HTTPURLResponse else { throw TokenGateClientError.cancelled }
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

/// Hands every redirect back instead of following it (the app's scheme is no HTTP URL).
final class NoRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
