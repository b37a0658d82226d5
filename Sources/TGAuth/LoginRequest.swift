/// The app's authorization request to `/auth/login` (RFC 6749 §4.1.1 with RFC 7636), plus
/// TokenGate's own choices. Built from the query; checked by ``LoginFlow/beginLogin(_:)``.
public struct LoginRequest: Sendable, Equatable {
    public var clientID: String?
    public var redirectURI: String?
    public var responseType: String?
    /// The app's `state`, returned to it unchanged.
    public var state: String?
    public var codeChallenge: String?
    public var codeChallengeMethod: String?
    public var provider: String?
    public var policy: String?
    /// Scopes asked for in addition to the provider's configured ones.
    public var scope: String?
    public var prompt: String?
    public var loginHint: String?
    public var domainHint: String?
    /// A step-up (RFC 9470 §4): the authentication context classes the sign-in must use.
    public var acrValues: String?
    /// A step-up: the most seconds since the user last authenticated.
    public var maxAge: String?
    /// A step-up from Entra's claims challenge: the OpenID Connect `claims` request (JSON).
    public var claims: String?
    /// A step-up for this API (its name under `/api/`): where its token goes.
    public var resource: String?
    /// A step-up of this account (its id): the sign-in must be this account's user.
    public var account: String?

    public init() {}

    /// Reads the parameters; a parameter sent twice is refused (RFC 6749 §3.1).
    public init(parameters: [(name: String, value: String)]) throws(AuthProblem) {
        var seen: Set<String> = []
        for (name, value) in parameters {
            guard seen.insert(name).inserted else {
                throw AuthProblem(.invalidRequest, "Parameter \(Self.printable(name)) appears more than once.")
            }
            switch name {
            case "client_id": clientID = value
            case "redirect_uri": redirectURI = value
            case "response_type": responseType = value
            case "state": state = value
            case "code_challenge": codeChallenge = value
            case "code_challenge_method": codeChallengeMethod = value
            case "provider": provider = value
            case "policy": policy = value
            case "scope": scope = value
            case "prompt": prompt = value
            case "login_hint": loginHint = value
            case "domain_hint": domainHint = value
            case "acr_values": acrValues = value
            case "max_age": maxAge = value
            case "claims": claims = value
            case "resource": resource = value
            case "account": account = value
            default: continue  // RFC 6749 §3.1: unknown parameters are ignored
            }
        }
    }

    /// A parameter name safe to echo in an error (short, visible ASCII).
    static func printable(_ name: String) -> String {
        let clean = name.utf8.allSatisfy { (0x21...0x7E).contains($0) } && name.utf8.count <= 40
        return clean ? name : "(unprintable)"
    }
}

/// What the provider sent back to `/auth/callback` (query or `form_post`).
public struct CallbackParameters: Sendable, Equatable {
    public var state: String?
    public var code: String?
    public var error: String?
    /// RFC 9207 issuer identification.
    public var issuer: String?

    public init(state: String? = nil, code: String? = nil, error: String? = nil, issuer: String? = nil) {
        self.state = state
        self.code = code
        self.error = error
        self.issuer = issuer
    }

    public init(parameters: [(name: String, value: String)]) {
        // First value wins; the state lookup decides whether any of it is trusted.
        for (name, value) in parameters.reversed() {
            switch name {
            case "state": state = value
            case "code": code = value
            case "error": error = value
            case "iss": issuer = value
            default: continue
            }
        }
    }
}

enum Syntax {
    /// RFC 7636 §4.2: S256 of a verifier is 43 base64url characters.
    static func isS256Challenge(_ text: String) -> Bool {
        text.utf8.count == 43 && text.utf8.allSatisfy(isBase64URL)
    }

    /// RFC 7636 §4.1: 43 to 128 unreserved characters.
    static func isCodeVerifier(_ text: String) -> Bool {
        (43...128).contains(text.utf8.count)
            && text.utf8.allSatisfy { isBase64URL($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "~") }
    }

    static func isBase64URL(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x2D
            || byte == 0x5F
    }

    /// Visible ASCII and spaces, at most `limit` bytes (RFC 6749 appendix A: state, scope).
    static func isVisibleASCII(_ text: String, limit: Int) -> Bool {
        !text.isEmpty && text.utf8.count <= limit && text.utf8.allSatisfy { (0x20...0x7E).contains($0) }
    }
}
