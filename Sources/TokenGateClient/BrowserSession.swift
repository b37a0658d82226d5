public import Foundation

/// The browser step of a sign-in or a logout: opens `url`, lets the user act at the identity
/// provider, and returns the URL the flow came back on (the app's redirect URI, whose scheme is
/// `callbackScheme`). On iOS and macOS: ``WebAuthenticationBrowserSession``
/// (`ASWebAuthenticationSession`); any other implementation elsewhere and in tests.
public protocol BrowserSession: Sendable {
    /// `ephemeral`: a private session that shares no cookies with the browser (no single sign-on
    /// with other apps, no "signed in as" left behind).
    /// Throws ``TokenGateClientError/cancelled`` when the user closes it.
    func authenticate(at url: URL, callbackScheme: String, ephemeral: Bool) async throws -> URL
}

#if canImport(AuthenticationServices)
import AuthenticationServices

/// ``BrowserSession`` through `ASWebAuthenticationSession`, presented from `anchor`.
@MainActor
public final class WebAuthenticationBrowserSession: NSObject, BrowserSession, @preconcurrency ASWebAuthenticationPresentationContextProviding {
    private let anchor: @MainActor () -> ASPresentationAnchor
    private var current: ASWebAuthenticationSession?

    /// `anchor`: the window to present from (on iOS the key window of the app's scene).
    public init(anchor: @escaping @MainActor () -> ASPresentationAnchor) {
        self.anchor = anchor
    }

    public nonisolated func authenticate(at url: URL, callbackScheme: String, ephemeral: Bool) async throws -> URL {
        try await withCheckedThrowingContinuation { continuation in
            Task { @MainActor in
                let session = ASWebAuthenticationSession(url: url, callbackURLScheme: callbackScheme) { url, error in
                    if let url {
                        continuation.resume(returning: url)
                    } else if let error = error as? ASWebAuthenticationSessionError, error.code == .canceledLogin {
                        continuation.resume(throwing: TokenGateClientError.cancelled)
                    } else {
                        continuation.resume(throwing: error ?? TokenGateClientError.cancelled)
                    }
                }
                session.presentationContextProvider = self
                session.prefersEphemeralWebBrowserSession = ephemeral
                current = session
                if !session.start() { continuation.resume(throwing: TokenGateClientError.cancelled) }
            }
        }
    }

    public func presentationAnchor(for session: ASWebAuthenticationSession) -> ASPresentationAnchor { anchor() }
}
#endif
