import Foundation
import HTTPTypes
import TGAuth
import TGBase
import TGHTTPServer

/// `POST /auth/token` (RFC 6749 §3.2): form-encoded in, RFC 6749 §5.1/§5.2 JSON out, never cached.
enum TokenEndpoint {
    static func handle(
        _ request: ServerRequest,
        grants: TokenGrants,
        transfers: TransferCodes,
        dpop: DPoPBinding
    ) async throws -> ServerResponse {
        let parameters = try parameters(request)
        func required(_ name: String) throws(OAuthError) -> String {
            guard let value = parameters[name], !value.isEmpty else { throw OAuthError(.invalidRequest, "\(name) is required.") }
            return value
        }
        // A DPoP proof, when the app sends one (RFC 9449 §5): its key binds the new tokens. An
        // app without DPoP has its header ignored, as by a server without DPoP, except on a
        // refresh (a session bound before the app's DPoP was turned off keeps its binding);
        // a token exchange checks it whoever asks (a bound subject token needs it).
        let usesDPoP = parameters["client_id"].map { dpop.mode(ofClient: $0) != .off } ?? false
        let grant = parameters["grant_type"]
        let proof =
            usesDPoP || grant == "refresh_token" || grant == TokenExchangeRequest.grantType
            ? try DPoPGate.proof(request, dpop: dpop) : nil
        let tokens: any Encodable
        switch grant {
        case "authorization_code":
            tokens = try await grants.redeemHandoff(
                HandoffRedemption(
                    code: try required("code"),
                    codeVerifier: try required("code_verifier"),
                    redirectURI: try required("redirect_uri"),
                    clientID: try required("client_id"),
                    deviceSecret: parameters["device_secret"],
                    dpop: proof
                )
            )
        case "refresh_token":
            tokens = try await grants.refresh(
                refreshToken: try required("refresh_token"),
                clientID: try required("client_id"),
                dpop: proof
            )
        case TokenExchangeRequest.grantType:
            tokens = try await grants.exchange(
                TokenExchangeRequest(
                    subjectToken: try required("subject_token"),
                    subjectTokenType: try required("subject_token_type"),
                    resource: parameters["resource"] ?? parameters["audience"],
                    scope: parameters["scope"],
                    requestedTokenType: parameters["requested_token_type"],
                    clientID: parameters["client_id"],
                    dpop: proof
                )
            )
        case TransferRedemption.grantType:
            tokens = try await transfers.redeemTransferCode(
                TransferRedemption(
                    transferCode: try required("transfer_code"),
                    codeVerifier: try required("code_verifier"),
                    clientID: try required("client_id"),
                    dpop: proof
                )
            )
        case nil:
            throw OAuthError(.invalidRequest, "grant_type is required.")
        default:
            throw OAuthError(
                .unsupportedGrantType,
                "grant_type must be authorization_code, refresh_token, \(TokenExchangeRequest.grantType) or \(TransferRedemption.grantType)."
            )
        }
        var fields: HTTPFields = [.contentType: "application/json", .cacheControl: "no-store", .pragma: "no-cache"]
        // With nonces on, every answer carries the current one for the next proof (RFC 9449 §8.2).
        if let nonce = dpop.currentNonce() { fields[.dpopNonce] = nonce }
        return JSON.response(.ok, tokens, headerFields: fields)
    }

    /// The form's parameters; each at most once (RFC 6749 §3.2).
    static func parameters(_ request: ServerRequest) throws(OAuthError) -> [String: String] {
        let type = request.fields.first(.contentType)?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces)
        guard type?.lowercased() == "application/x-www-form-urlencoded" else {
            throw OAuthError(.invalidRequest, "Send the parameters as application/x-www-form-urlencoded.")
        }
        // String(decoding:) would turn bytes that are not UTF-8 into U+FFFD; validate first.
        guard let text = String(validating: request.body, as: UTF8.self), let pairs = FormURLEncoding.decodeAll(text) else {
            throw OAuthError(.invalidRequest, "The form has a bad percent-encoding or is not UTF-8; encode it as application/x-www-form-urlencoded.")
        }
        var result: [String: String] = [:]
        for (name, value) in pairs {
            guard result.updateValue(value, forKey: name) == nil else {
                throw OAuthError(.invalidRequest, "A parameter appears more than once.")
            }
        }
        return result
    }
}
