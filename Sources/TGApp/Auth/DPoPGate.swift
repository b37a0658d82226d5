import HTTPTypes
public import TGAuth
public import TGHTTPServer

/// A TokenGate access token as a request presents it (`Authorization: Bearer …` or `DPoP …`).
struct PresentedToken {
    var value: Substring
    /// Sent with the `DPoP` scheme (RFC 9449 §7.1).
    var isDPoP: Bool
}

/// DPoP at TokenGate's HTTP edge (RFC 9449): which proof a request carries, and whether a
/// session's binding is honoured. The proof's own rules are `TGAuth`'s ``DPoPVerifier``.
enum DPoPGate {
    /// Checks that a request using `session` with `token` satisfies the session's binding: a
    /// bound session needs the `DPoP` scheme and one proof of its key for this method and URL,
    /// with the token's hash (`ath`); an unbound one needs the `Bearer` scheme. Runs on the
    /// cached proxy path too: no I/O, one signature check for a bound session.
    static func check(_ request: ServerRequest, session: SessionContext, token: PresentedToken, auth: AuthService) throws(DPoPError) {
        do {
            try checkBinding(request, session: session, token: token, auth: auth)
        } catch {
            var refusal = error
            refusal.algorithms = auth.dpop.algorithmNames
            throw refusal
        }
    }

    private static func checkBinding(_ request: ServerRequest, session: SessionContext, token: PresentedToken, auth: AuthService) throws(DPoPError) {
        guard let bound = session.dpopJKT else {
            guard !token.isDPoP else {
                throw DPoPError(.invalidToken, "This access token is not DPoP-bound: send it as Authorization: Bearer.")
            }
            return
        }
        guard token.isDPoP else {
            throw DPoPError(.invalidToken, "This access token is DPoP-bound: send it as Authorization: DPoP with a DPoP proof.")
        }
        guard let proof = try onlyProof(request) else { throw DPoPError(.invalidProof, "Send a DPoP proof in the DPoP header.") }
        let target = DPoPTarget(method: request.method.rawValue, uri: auth.issuer + request.path, accessToken: token.value)
        guard try auth.dpop.verify(proof, for: target) == bound else {
            throw DPoPError(.invalidProof, "The DPoP proof is signed by another key than the one this access token is bound to.")
        }
    }

    /// The thumbprint of the key of a token request's proof, when it sends one (verified for
    /// `POST` to the token endpoint's public URL).
    static func proofKey(_ request: ServerRequest, auth: AuthService) throws(OAuthError) -> String? {
        do {
            guard let proof = try onlyProof(request) else { return nil }
            return try auth.dpop.verify(proof, for: DPoPTarget(method: request.method.rawValue, uri: auth.issuer + request.path))
        } catch {
            throw OAuthError(error)
        }
    }

    /// The one `DPoP` header's value; nil without one; more than one is refused (RFC 9449 §4.3).
    private static func onlyProof(_ request: ServerRequest) throws(DPoPError) -> String? {
        // The common case, no proof, without building an array.
        guard request.fields.contains(.dpop) else { return nil }
        let proofs = request.fields.values(.dpop)
        guard proofs.count == 1 else { throw DPoPError(.invalidProof, "Send exactly one DPoP header.") }
        return proofs[0]
    }
}

/// A resource's answer to a refused DPoP request: 401 with a `DPoP` challenge naming the error
/// and the accepted algorithms (RFC 9449 §7.1), and the nonce to use (§9).
extension DPoPError: HTTPResponseError {
    public func response() -> ServerResponse {
        let error = code.rawValue
        var fields: HTTPFields = [
            .wwwAuthenticate: #"DPoP realm="tokengate", error="\#(error)", algs="\#(algorithms.joined(separator: " "))""#,
            .cacheControl: "no-store",
        ]
        if let nonce { fields[.dpopNonce] = nonce }
        return Problem(status: .unauthorized, code: error, detail: description, headerFields: fields).response()
    }
}

extension HTTPField.Name {
    /// RFC 9449 §4.1: the proof.
    static let dpop = HTTPField.Name("DPoP")!
    /// RFC 9449 §8: the nonce the next proof must carry.
    static let dpopNonce = HTTPField.Name("DPoP-Nonce")!
}
