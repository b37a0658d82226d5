import HTTPTypes
import TGAuth
import TGHTTPServer

/// `GET /.well-known/oauth-authorization-server` (RFC 8414): TokenGate as the authorization
/// server of the apps, so AppAuth and other standard clients configure themselves.
enum AuthorizationServerMetadata {
    static func add(to router: inout Router, issuer: String, dpopAlgorithms: [String]) {
        let document = Document(
            issuer: issuer,
            authorizationEndpoint: issuer + "/auth/login",
            tokenEndpoint: issuer + "/auth/token",
            responseTypesSupported: ["code"],
            responseModesSupported: ["query"],
            grantTypesSupported: ["authorization_code", "refresh_token", TokenExchangeRequest.grantType, TransferRedemption.grantType],
            // RFC 9449 §5.1: the proofs TokenGate checks, for the apps configured with dpop.
            dpopSigningAlgValuesSupported: dpopAlgorithms,
            codeChallengeMethodsSupported: ["S256"],
            // Apps are public clients: PKCE, not a secret, proves them.
            tokenEndpointAuthMethodsSupported: ["none"],
            authorizationResponseIssParameterSupported: true,
            serviceDocumentation: issuer + "/openapi.yaml"
        )
        let response = JSON.response(.ok, document, headerFields: [.cacheControl: "public, max-age=3600"])
        router.add(.get, "/.well-known/oauth-authorization-server", .sync { _, _ in response })
    }

    /// The metadata document, with RFC 8414 §2's member names.
    struct Document: Encodable {
        var issuer: String
        var authorizationEndpoint: String
        var tokenEndpoint: String
        var responseTypesSupported: [String]
        var responseModesSupported: [String]
        var grantTypesSupported: [String]
        var dpopSigningAlgValuesSupported: [String]
        var codeChallengeMethodsSupported: [String]
        var tokenEndpointAuthMethodsSupported: [String]
        var authorizationResponseIssParameterSupported: Bool
        var serviceDocumentation: String

        enum CodingKeys: String, CodingKey {
            case issuer
            case authorizationEndpoint = "authorization_endpoint"
            case tokenEndpoint = "token_endpoint"
            case responseTypesSupported = "response_types_supported"
            case responseModesSupported = "response_modes_supported"
            case grantTypesSupported = "grant_types_supported"
            case dpopSigningAlgValuesSupported = "dpop_signing_alg_values_supported"
            case codeChallengeMethodsSupported = "code_challenge_methods_supported"
            case tokenEndpointAuthMethodsSupported = "token_endpoint_auth_methods_supported"
            case authorizationResponseIssParameterSupported = "authorization_response_iss_parameter_supported"
            case serviceDocumentation = "service_documentation"
        }
    }
}
