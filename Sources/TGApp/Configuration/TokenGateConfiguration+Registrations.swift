import TGAuth

/// What an operator registers at each provider for this configuration.
extension TokenGateConfiguration {
    /// The back-channel logout URI of every provider that takes logout tokens, to register at
    /// each provider (OpenID Connect Back-Channel Logout 1.0 §2.2, `backchannel_logout_uri`).
    public var backChannelLogoutURIs: [(provider: String, uri: String)] {
        let base = TokenGateApp.publicBaseURL(self)
        return providers.filter(\.acceptsBackChannelLogout).map { ($0.name, base + "/auth/backchannel-logout/" + $0.name) }
    }

    /// The URLs to register at each provider, one line each (`tokengate check-config` prints
    /// them): TokenGate's callback (the redirect URI), its landing route after the provider's
    /// logout page, and the back-channel logout URI when the provider takes logout tokens.
    public var providerRegistrations: String {
        guard !providers.isEmpty else { return "" }
        let base = TokenGateApp.publicBaseURL(self)
        let backChannel = Dictionary(backChannelLogoutURIs.map { ($0.provider, $0.uri) }, uniquingKeysWith: { first, _ in first })
        var text = "Register at each provider:\n"
        for provider in providers {
            text += "  \(provider.name): redirect_uri \(base)/auth/callback\n"
            text += "  \(provider.name): post_logout_redirect_uri \(base)\(Logouts.logoutReturnPath)\n"
            if let uri = backChannel[provider.name] {
                text += "  \(provider.name): backchannel_logout_uri \(uri)\n"
            } else {
                text += "  \(provider.name): no back-channel logout (backchannel_logout: false, or kind oauth2)\n"
            }
            if provider.acceptsSharedSignals {
                text +=
                    "  \(provider.name): shared signals stream endpoint_url \(base)/auth/ssf/\(provider.name) "
                    + "(delivery urn:ietf:rfc:8935, aud \(provider.sharedSignalsAudience ?? provider.clientID))\n"
            }
        }
        return text
    }
}
