import HTTPTypes
public import TGAuth
import TGEventLoop
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
    /// with the token's hash (`ath`), used nowhere before (the shared record: a statement); an
    /// unbound one needs the `Bearer` scheme.
    static func check(_ request: ServerRequest, session: SessionContext, token: PresentedToken, dpop: DPoPBinding) async throws {
        do {
            guard let bound = try boundKey(session: session, isDPoP: token.isDPoP) else { return }
            guard let proof = try onlyProof(request) else { throw DPoPError(.invalidProof, "Send a DPoP proof in the DPoP header.") }
            // Never on an event loop (a signature check and a statement). An async route's task
            // prefers its connection's loop as executor (its first job runs there inline), and a
            // session from memory brings no suspension that would leave it: for this work the
            // task prefers the global concurrent executor instead (the same task: its
            // cancellation and task-local values carry over; no task of its own is made).
            let loop = request.loop
            let method = request.method.rawValue
            let path = String(request.path)
            let presented = String(token.value)
            let work: @Sendable () async throws -> Void = {
                assert(loop?.inEventLoop != true, "a DPoP proof checked on an event loop")
                // The key is compared before the signature is checked, and the proof is recorded
                // only once it is found good: a made-up proof costs no signature check and no record.
                let verified = try dpop.verify(proof, method: method, path: path, accessToken: presented[...], boundTo: bound)
                try await dpop.recordProof(verified)
            }
            if loop?.inEventLoop == true {
                try await withTaskExecutorPreference(globalConcurrentExecutor) { try await work() }
            } else {
                try await work()
            }
        } catch var refusal as DPoPError {
            refusal.algorithms = dpop.algorithmNames
            throw refusal
        }
    }

    /// Whether `session` is bound, so that a proof must be checked (off the event loop: a
    /// signature check and a statement); throws when the scheme does not match the binding.
    static func needsProof(session: SessionContext, isDPoP: Bool, dpop: DPoPBinding) throws(DPoPError) -> Bool {
        do {
            return try boundKey(session: session, isDPoP: isDPoP) != nil
        } catch {
            var refusal = error
            refusal.algorithms = dpop.algorithmNames
            throw refusal
        }
    }

    /// The key `session` is bound to (nil for a bearer session), once the scheme matches it.
    private static func boundKey(session: SessionContext, isDPoP: Bool) throws(DPoPError) -> String? {
        guard let bound = session.dpopJKT else {
            guard !isDPoP else {
                throw DPoPError(.invalidToken, "This access token is not DPoP-bound: send it as Authorization: Bearer.")
            }
            return nil
        }
        guard isDPoP else {
            throw DPoPError(.invalidToken, "This access token is DPoP-bound: send it as Authorization: DPoP with a DPoP proof.")
        }
        return bound
    }

    /// A token request's verified proof, when it sends one (for `POST` to the token endpoint's
    /// public URL); not yet recorded: the grant records it once the grant is found good.
    static func proof(_ request: ServerRequest, dpop: DPoPBinding) throws(OAuthError) -> DPoPProof? {
        do {
            guard let proof = try onlyProof(request) else { return nil }
            return try dpop.verify(proof, method: request.method.rawValue, path: request.path)
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
