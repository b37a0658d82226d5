import Foundation
import HTTPTypes
import Logging
import TGAuth
import TGCrypto
import TGProxy

#if canImport(Glibc)
import Glibc
import TGBase
#endif

/// Checks a decoded configuration and lists every problem with its key path: the rules that
/// involve more than one value or more than a number's bounds are here; a numeric setting's
/// bounds are declared where it is decoded (``SettingBounds``), and the values the decoding found
/// outside them are reported after these.
struct ConfigurationValidator {
    let configuration: TokenGateConfiguration
    /// The decoding's ``SettingBounds/problems``.
    let outOfBounds: [ConfigurationError.Problem]
    private var found: [ConfigurationError.Problem] = []

    init(configuration: TokenGateConfiguration, outOfBounds: [ConfigurationError.Problem] = []) {
        self.configuration = configuration
        self.outOfBounds = outOfBounds
    }

    func problems() -> [ConfigurationError.Problem] {
        var validator = self
        validator.check()
        return validator.found + outOfBounds
    }

    private mutating func problem(_ key: String, _ message: String) { found.append(.init(key: key, message: message)) }

    /// What is allowed but deserves a second look; `check-config` prints these on standard error
    /// and `serve` logs them at start.
    func warnings() -> [ConfigurationError.Problem] {
        var warnings: [ConfigurationError.Problem] = []
        let admin = configuration.admin
        if Self.isIPAddress(admin.host), !Loopback.isLoopback(host: admin.host) {
            warnings.append(
                .init(
                    key: "admin.host",
                    message:
                        "\(admin.host) is not a loopback address: /metrics and the readiness detail are reachable from the network; keep admin.port private (firewall, network policy), never behind the public reverse proxy"
                )
            )
        }
        return warnings
    }

    private mutating func check() {
        let c = configuration
        checkServer(c.server)
        checkAdmin(c.admin, server: c.server)
        if let url = c.database.url {
            secret(url, "database.url")
            if url.problem == nil, url.value.isEmpty { problem("database.url", "must not be empty") }
        } else {
            problem("database.url", "is required: set it in the file or with TOKENGATE_DATABASE_URL")
        }
        if Logger.Level(rawValue: c.log.level) == nil {
            problem("log.level", "must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        checkEncryption(c.encryption)
        checkClients(c.clients, providers: Set(c.providers.map(\.name)))
        checkProviders(c.providers)
        checkUpstreams(c.upstreams, providers: Set(c.providers.map(\.name)))
        checkDPoP(c.dpop)
        if !c.clients.isEmpty, c.encryption.keys.isEmpty {
            problem("encryption.keys", "are required when clients are registered (refresh tokens are stored encrypted)")
        }
    }

    private mutating func checkDPoP(_ dpop: TokenGateConfiguration.DPoP) {
        let names = JWSAlgorithm.allCases.map(\.rawValue)
        if dpop.algorithms.isEmpty { problem("dpop.algorithms", "must name at least one of \(names.joined(separator: ", "))") }
        for (index, name) in dpop.algorithms.enumerated() where JWSAlgorithm(rawValue: name) == nil {
            problem("dpop.algorithms[\(index)]", "must be one of \(names.joined(separator: ", ")) (never none or HMAC)")
        }
    }

    private mutating func checkServer(_ server: TokenGateConfiguration.Server) {
        if !Self.isIPAddress(server.host) { problem("server.host", "must be an IPv4 or IPv6 address") }
        webURL(server.publicBaseURL, "server.public_base_url")
        for (index, proxy) in server.trustedProxies.enumerated() where Self.parseCIDR(proxy) == nil {
            problem("server.trusted_proxies[\(index)]", "must be an IP address or CIDR (10.0.0.0/8)")
        }
    }

    /// The admin listener: its own address, never the public one (same port on the same or a
    /// wildcard address would fight over the socket, or serve the admin routes publicly).
    private mutating func checkAdmin(_ admin: TokenGateConfiguration.Admin, server: TokenGateConfiguration.Server) {
        if !Self.isIPAddress(admin.host) { problem("admin.host", "must be an IPv4 or IPv6 address") }
        let wildcards: Set<String> = ["0.0.0.0", "::"]
        let overlapping = admin.host == server.host || wildcards.contains(admin.host) || wildcards.contains(server.host)
        if admin.port != 0, admin.port == server.port, overlapping {
            let address = admin.host.contains(":") ? "[\(admin.host)]:\(admin.port)" : "\(admin.host):\(admin.port)"
            problem("admin.port", "must differ from server.port: the admin listener needs an address of its own (\(address))")
        }
    }

    private mutating func checkEncryption(_ encryption: TokenGateConfiguration.Encryption) {
        var seen: Set<String> = []
        for (index, key) in encryption.keys.enumerated() {
            let path = "encryption.keys[\(index)]"
            if key.id.isEmpty || key.id.utf8.count > 64 || !key.id.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) {
                problem("\(path).id", "must be 1 to 64 printable characters without spaces")
            }
            if !seen.insert(key.id).inserted { problem("\(path).id", "duplicates another key id") }
            secret(key.secret, "\(path).secret")
            if key.secret.problem == nil, Self.decodeKey(key.secret.value)?.count != 32 {
                problem("\(path).secret", "must be 32 bytes, base64 or base64url encoded (openssl rand -base64 32)")
            }
        }
        if let current = encryption.currentKeyID {
            if !seen.contains(current) { problem("encryption.current_key_id", "names no key in encryption.keys") }
        } else if !encryption.keys.isEmpty {
            problem("encryption.current_key_id", "is required when keys are set")
        }
    }

    private mutating func checkClients(_ clients: [TokenGateConfiguration.Client], providers: Set<String>) {
        var seen: Set<String> = []
        for (index, client) in clients.enumerated() {
            let path = "clients[\(index)]"
            if client.clientID.isEmpty { problem("\(path).client_id", "must not be empty") }
            if !seen.insert(client.clientID).inserted { problem("\(path).client_id", "duplicates another client") }
            if client.redirectURIs.isEmpty { problem("\(path).redirect_uris", "must list at least one redirect URI") }
            if DPoPMode(rawValue: client.dpop) == nil { problem("\(path).dpop", "must be off, allowed or required") }
            for (position, uri) in client.redirectURIs.enumerated() {
                if let message = Self.redirectURIProblem(uri) { problem("\(path).redirect_uris[\(position)]", message) }
            }
            for (position, uri) in client.postLogoutRedirectURIs.enumerated() {
                if let message = Self.redirectURIProblem(uri) { problem("\(path).post_logout_redirect_uris[\(position)]", message) }
            }
            for (position, name) in client.providers.enumerated() where !providers.contains(name) {
                problem("\(path).providers[\(position)]", "names no configured provider")
            }
        }
    }

    private mutating func checkProviders(_ providers: [TokenGateConfiguration.Provider]) {
        var seen: Set<String> = []
        for (index, provider) in providers.enumerated() {
            let path = "providers[\(index)]"
            if !Self.isURLSafeName(provider.name) { problem("\(path).name", "must be 1 to 64 of a-z, 0-9, - and _") }
            if !seen.insert(provider.name).inserted { problem("\(path).name", "duplicates another provider") }
            for (key, url) in provider.configuredURLs { webURL(url, "\(path).\(key)") }
            for (key, message) in provider.kindProblems() { problem("\(path).\(key)", message) }
            if provider.clientID.isEmpty { problem("\(path).client_id", "must not be empty") }
            if let secret = provider.clientSecret { self.secret(secret, "\(path).client_secret") }
            if let key = provider.privateKey { secret(key, "\(path).private_key") }
            if let certificate = provider.privateKeyCertificate { secret(certificate, "\(path).private_key_certificate") }
            if let authorization = provider.sharedSignalsAuthorization { secret(authorization, "\(path).shared_signals_authorization") }
            checkAuthorizeParameters(provider.authorizeParameters, "\(path).authorize_parameters")
            switch provider.authMethod {
            case .clientSecretBasic, .clientSecretPost:
                if provider.clientSecret == nil { problem("\(path).client_secret", "is required for \(provider.authMethod.rawValue)") }
            case .privateKeyJWT:
                if provider.privateKey == nil { problem("\(path).private_key", "is required for private_key_jwt") }
            }
        }
    }

    /// Parameters TokenGate sets itself, or that would replace the whole request: an extra one
    /// of these would break PKCE, state, nonce or the client's identity, or be ignored.
    static let protocolParameters: Set<String> = [
        "state", "nonce", "code_challenge", "code_challenge_method", "redirect_uri", "client_id", "response_type", "response_mode",
        "scope", "request", "request_uri",
    ]

    private mutating func checkAuthorizeParameters(_ parameters: [String: String], _ path: String) {
        for (name, value) in parameters.sorted(by: { $0.key < $1.key }) {
            if Self.protocolParameters.contains(name.lowercased()) {
                let hints = ["scope": " (list them under scopes)", "response_mode": " (use response_mode)"]
                let hint = hints[name.lowercased()] ?? ""
                problem("\(path).\(name)", "is a protocol parameter TokenGate sets itself; it may not be configured\(hint)")
            } else if name.lowercased() == "prompt", name != "prompt" {
                // Names are case-sensitive: the provider would ignore it, and the app's prompt would
                // not be merged with it.
                problem("\(path).\(name)", "must be written prompt")
            } else if name == "prompt" {
                let values = value.split(separator: " ").map(String.init)
                let known: Set<String> = ["login", "consent", "select_account", "create"]
                if values.isEmpty || !values.allSatisfy(known.contains) {
                    problem("\(path).prompt", "must be one or more of login, consent, select_account, create (none cannot be required)")
                }
            }
        }
    }

    private mutating func checkUpstreams(_ upstreams: [TokenGateConfiguration.Upstream], providers: Set<String>) {
        var seen: Set<String> = []
        for (index, upstream) in upstreams.enumerated() {
            let path = "upstreams[\(index)]"
            if !Self.isURLSafeName(upstream.name) { problem("\(path).name", "must be 1 to 64 of a-z, 0-9, - and _") }
            if !seen.insert(upstream.name).inserted { problem("\(path).name", "duplicates another upstream") }
            webURL(upstream.baseURL, "\(path).base_url")
            if !providers.contains(upstream.provider) { problem("\(path).provider", "names no configured provider") }
            if let url = URLComponents(string: upstream.baseURL), url.query != nil {
                problem("\(path).base_url", "must have no query (the caller's query is forwarded)")
            }
            for method in upstream.methods where !TokenGateConfiguration.Upstream.defaultMethods.contains(method) {
                problem("\(path).methods", "\(method) is not one of \(TokenGateConfiguration.Upstream.defaultMethods.joined(separator: ", "))")
            }
            if !TokenGateConfiguration.Upstream.stepUpTokenModes.contains(upstream.stepUpTokens) {
                problem("\(path).step_up_tokens", "must be shared or separate")
            }
            if upstream.websocket, !upstream.methods.contains("GET") {
                problem("\(path).websocket", "needs GET among methods (a WebSocket opens with GET)")
            }
            for (position, origin) in upstream.websocketOrigins.enumerated() where !Self.isOrigin(origin) {
                problem("\(path).websocket_origins[\(position)]", "must be an origin: scheme://host or scheme://host:port, no path")
            }
            for (position, prefix) in upstream.pathPrefixes.enumerated() where !prefix.hasPrefix("/") || prefix.contains("..") {
                problem("\(path).path_prefixes[\(position)]", "must start with / and contain no ..")
            }
            for name in upstream.headers.keys.sorted() {
                if HTTPField.Name(name) == nil || ProxyHeaders.managed.contains(name.lowercased()) {
                    problem("\(path).headers.\(name)", "is not a header name TokenGate lets configuration set")
                }
            }
        }
    }

    /// `scheme://host[:port]` as a browser sends it in `Origin`.
    static func isOrigin(_ text: String) -> Bool {
        guard let url = URLComponents(string: text), let scheme = url.scheme, ["http", "https"].contains(scheme.lowercased()),
            let host = url.host, !host.isEmpty, url.path.isEmpty, url.query == nil, url.fragment == nil, url.user == nil
        else { return false }
        return true
    }

    private mutating func secret(_ secret: Secret, _ key: String) {
        if let message = secret.problem { problem(key, message) }
    }

    /// https, or http to a loopback host (development and tests).
    private mutating func webURL(_ text: String, _ key: String) {
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            problem(key, "must be an absolute https URL")
            return
        }
        if url.fragment != nil || url.user != nil || url.password != nil { problem(key, "must have no fragment or user info") }
        if scheme == "https" { return }
        if scheme == "http", Loopback.isLoopback(host: host) { return }
        problem(key, "must be an https URL (http is allowed for loopback hosts only)")
    }

    static func redirectURIProblem(_ uri: String) -> String? {
        guard let url = URLComponents(string: uri), let scheme = url.scheme?.lowercased(), !scheme.isEmpty else {
            return "must be an absolute URI"
        }
        if url.fragment != nil { return "must not have a fragment" }
        switch scheme {
        case "https":
            return (url.host ?? "").isEmpty ? "must name a host" : nil
        case "http":
            return Loopback.isLoopback(host: url.host ?? "") ? nil : "http is allowed for loopback hosts only (RFC 8252 §7.3)"
        case "javascript", "data", "file", "vbscript", "about", "blob":
            return "scheme \(scheme) is not allowed"
        default:
            // Private-use URI scheme (RFC 8252 §7.1), e.g. com.example.app:/oauth2redirect.
            return scheme.contains(".") ? nil : "a custom scheme must be a reverse domain name (com.example.app)"
        }
    }

    static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }

    /// `(address, prefix length)` for `10.0.0.0/8`, `::1`, `192.168.1.5`.
    static func parseCIDR(_ text: String) -> (address: String, prefix: Int)? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, isIPAddress(String(parts[0])) else { return nil }
        let maximum = parts[0].contains(":") ? 128 : 32
        guard parts.count == 2 else { return (String(parts[0]), maximum) }
        guard let prefix = Int(parts[1]), (0...maximum).contains(prefix) else { return nil }
        return (String(parts[0]), prefix)
    }

    static func isURLSafeName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D || $0 == 0x5F }
    }

    /// A 32-byte key from base64 (standard, padded or not) or base64url.
    static func decodeKey(_ text: String) -> [UInt8]? {
        if let bytes = try? Base64URL.decode(text) { return bytes }
        var padded = text
        while padded.count % 4 != 0 { padded += "=" }
        return Data(base64Encoded: padded).map { Array($0) }
    }
}
