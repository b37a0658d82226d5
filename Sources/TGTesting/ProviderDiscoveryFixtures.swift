/// OpenID Provider metadata (`/.well-known/openid-configuration`) shaped exactly as each real
/// provider publishes it: the same member names, order, nesting and value styles (including
/// Entra's literal `{tenantid}` issuer and `"tenant_region_scope": null`), with every URL's origin
/// replaced by a parameter so a test can point the document at a loopback fake server.
///
/// Each function keeps the real path of every URL; only the scheme and host change. Pass origins
/// without a trailing slash (`http://127.0.0.1:8080`). The documents are snapshots: the providers
/// change their lists (claims, scopes) from time to time, so tests should not depend on a list
/// being complete, only on the members a client reads. Informational URLs a client never calls
/// (`rbac_url`, `service_documentation`, `op_policy_uri`, `op_tos_uri`) keep their real values.
public enum ProviderDiscoveryFixtures {
    /// The tenant id Microsoft uses for personal Microsoft accounts (the `consumers` audience).
    public static let entraConsumersTenantID = "9188040d-6c67-4c5b-b112-36a304b66dad"

    // MARK: Microsoft Entra ID v2

    /// Entra ID v2 for the `common` audience; `base` replaces `https://login.microsoftonline.com`.
    ///
    /// The issuer is the literal template `<base>/{tenantid}/v2.0` (braces included), which no
    /// token ever carries: a client must accept `<base>/<tid>/v2.0` for the token's `tid`.
    /// `userinfo_endpoint` is on `https://graph.microsoft.com` in the real document; `graphBase`
    /// replaces that origin (default: `base`, so one fake server answers every endpoint). There
    /// is no `revocation_endpoint`.
    ///
    /// Source: the document served at
    /// `https://login.microsoftonline.com/common/v2.0/.well-known/openid-configuration`, as
    /// snapshotted in panva/wellknown `issuers/entra-common/entra-common.mjs` and in
    /// shogo82148/goat `oidc/testdata/microsoft-openid-configuration.json` (identical member lists).
    public static func entraCommon(base: String, graphBase: String? = nil) -> String {
        entraDocument(base: base, graphBase: graphBase, tenantSegment: "common", issuer: "\(base)/{tenantid}/v2.0")
    }

    /// Entra ID v2 for the `organizations` audience (work and school accounts only); same shape
    /// and same `{tenantid}` issuer template as `entraCommon(base:)`.
    ///
    /// Source: panva/wellknown `issuers/entra-organizations/entra-organizations.mjs`, a snapshot
    /// of `https://login.microsoftonline.com/organizations/v2.0/.well-known/openid-configuration`.
    public static func entraOrganizations(base: String, graphBase: String? = nil) -> String {
        entraDocument(base: base, graphBase: graphBase, tenantSegment: "organizations", issuer: "\(base)/{tenantid}/v2.0")
    }

    /// Entra ID v2 for the `consumers` audience (personal Microsoft accounts only). Unlike
    /// `common` and `organizations`, the issuer is a real one: the fixed consumer tenant,
    /// `<base>/9188040d-6c67-4c5b-b112-36a304b66dad/v2.0`.
    ///
    /// Sources: the issuer is quoted from openiddict/openiddict-core issue #1764 ("the fetched
    /// configuration is https://login.microsoftonline.com/consumers/v2.0/.well-known/openid-configuration
    /// but the issuer field is https://login.microsoftonline.com/9188040d-6c67-4c5b-b112-36a304b66dad/v2.0").
    /// Not verified: no full snapshot of the `consumers` document was found; the other members are
    /// the `common` document's with `/consumers/` in the paths. Whether the real document also
    /// carries `kerberos_endpoint` and `device_authorization_endpoint` could not be checked.
    public static func entraConsumers(base: String, graphBase: String? = nil) -> String {
        entraDocument(
            base: base,
            graphBase: graphBase,
            tenantSegment: "consumers",
            issuer: "\(base)/\(entraConsumersTenantID)/v2.0"
        )
    }

    /// Entra ID v2 for one tenant (`tenantID`, a GUID): every URL, the issuer included, names the
    /// tenant; the issuer is `<base>/<tenantID>/v2.0`.
    ///
    /// Source: the tenant-specific document embedded in micronaut-projects/micronaut-security's
    /// `MicrosoftEndSessionEndpointTest` (tenant `8177030d-4c56-3c4a-a111-15a102c55cba`), whose
    /// members match the `common` snapshot except for the tenant in every URL.
    public static func entraTenant(base: String, tenantID: String, graphBase: String? = nil) -> String {
        entraDocument(base: base, graphBase: graphBase, tenantSegment: tenantID, issuer: "\(base)/\(tenantID)/v2.0")
    }

    /// The shared Entra v2 layout (member order as served by Microsoft, not alphabetical).
    private static func entraDocument(base: String, graphBase: String?, tenantSegment: String, issuer: String) -> String {
        let graph = graphBase ?? base
        return #"""
            {
              "token_endpoint": "\#(base)/\#(tenantSegment)/oauth2/v2.0/token",
              "token_endpoint_auth_methods_supported": [
                "client_secret_post",
                "private_key_jwt",
                "client_secret_basic"
              ],
              "jwks_uri": "\#(base)/\#(tenantSegment)/discovery/v2.0/keys",
              "response_modes_supported": [
                "query",
                "fragment",
                "form_post"
              ],
              "subject_types_supported": [
                "pairwise"
              ],
              "id_token_signing_alg_values_supported": [
                "RS256"
              ],
              "response_types_supported": [
                "code",
                "id_token",
                "code id_token",
                "id_token token"
              ],
              "scopes_supported": [
                "openid",
                "profile",
                "email",
                "offline_access"
              ],
              "issuer": "\#(issuer)",
              "request_uri_parameter_supported": false,
              "userinfo_endpoint": "\#(graph)/oidc/userinfo",
              "authorization_endpoint": "\#(base)/\#(tenantSegment)/oauth2/v2.0/authorize",
              "device_authorization_endpoint": "\#(base)/\#(tenantSegment)/oauth2/v2.0/devicecode",
              "http_logout_supported": true,
              "frontchannel_logout_supported": true,
              "end_session_endpoint": "\#(base)/\#(tenantSegment)/oauth2/v2.0/logout",
              "claims_supported": [
                "sub",
                "iss",
                "cloud_instance_name",
                "cloud_instance_host_name",
                "cloud_graph_host_name",
                "msgraph_host",
                "aud",
                "exp",
                "iat",
                "auth_time",
                "acr",
                "nonce",
                "preferred_username",
                "name",
                "tid",
                "ver",
                "at_hash",
                "c_hash",
                "email"
              ],
              "kerberos_endpoint": "\#(base)/\#(tenantSegment)/kerberos",
              "tenant_region_scope": null,
              "cloud_instance_name": "microsoftonline.com",
              "cloud_graph_host_name": "graph.windows.net",
              "msgraph_host": "graph.microsoft.com",
              "rbac_url": "https://pas.windows.net"
            }
            """#
    }

    // MARK: Azure AD B2C

    /// Azure AD B2C, one user flow (policy). `base` replaces `https://<tenant>.b2clogin.com`,
    /// `tenant` is the tenant name (`contoso`, giving `contoso.onmicrosoft.com` in the paths),
    /// `policy` the user flow (`B2C_1_signupsignin`), `tenantID` the tenant's GUID.
    ///
    /// The issuer names the tenant GUID, not the policy, and ends with a slash:
    /// `<base>/<tenantID>/v2.0/` (the default "https://<domain>/<tenant>/v2.0/" issuer format; a
    /// user flow can instead be set to `https://<domain>/tfp/<tenant>/<policy>/v2.0/`). Endpoints
    /// carry the policy in the path. There is no `userinfo_endpoint` and no `revocation_endpoint`.
    /// `lowercasePolicy` writes the policy in lower case in the paths, as Microsoft's own
    /// documentation example and the PlayFab sample show; pass `false` to keep the given case.
    ///
    /// Sources: member list, order and values from a real B2C user-flow document copied into an
    /// MSAL `authorityMetadata` setting in public GitHub code (tenant `sunquestazuredev`, policy
    /// `B2C_1_Signin_SignUp_Invictus`; repository not identifiable through the code index), and
    /// from itk-dev/naevnssekretariatet `public/cacheTest.php` (a cached B2C custom-policy
    /// document, same members and values); the lower-case path form from the PlayFab
    /// "Integrate PlayFab with Azure AD B2C" sample README (`b2c_1_susi/oauth2/v2.0/authorize`,
    /// issuer `https://b2cplayfab.b2clogin.com/55bf5ec7-…/v2.0/`); issuer formats from the
    /// AzureAD/microsoft-identity-web wiki page "Azure AD B2C issuer claim support".
    /// Not verified: whether B2C lower-cases the policy itself or echoes the request's case (the
    /// lower-case examples were requested in lower case; the MSAL copy keeps `B2C_1_...`).
    /// `claims_supported` depends on the claims the user flow returns; this one is the MSAL copy's
    /// list without its two application-specific attributes (`extension_VueRoleName`,
    /// `isForgotPassword`). The default `tenantID` is a placeholder, not a real tenant.
    public static func azureADB2C(
        base: String,
        tenant: String,
        policy: String,
        tenantID: String = "2d5ab2b4-1c0f-4a6e-9d43-7c1f0e6a8b10",
        lowercasePolicy: Bool = true
    ) -> String {
        let authority = "\(base)/\(tenant).onmicrosoft.com/\(lowercasePolicy ? policy.lowercased() : policy)"
        return #"""
            {
              "issuer": "\#(base)/\#(tenantID)/v2.0/",
              "authorization_endpoint": "\#(authority)/oauth2/v2.0/authorize",
              "token_endpoint": "\#(authority)/oauth2/v2.0/token",
              "end_session_endpoint": "\#(authority)/oauth2/v2.0/logout",
              "jwks_uri": "\#(authority)/discovery/v2.0/keys",
              "response_modes_supported": [
                "query",
                "fragment",
                "form_post"
              ],
              "response_types_supported": [
                "code",
                "code id_token",
                "code token",
                "code id_token token",
                "id_token",
                "id_token token",
                "token",
                "token id_token"
              ],
              "scopes_supported": [
                "openid"
              ],
              "subject_types_supported": [
                "pairwise"
              ],
              "id_token_signing_alg_values_supported": [
                "RS256"
              ],
              "token_endpoint_auth_methods_supported": [
                "client_secret_post",
                "client_secret_basic"
              ],
              "claims_supported": [
                "name",
                "emails",
                "given_name",
                "idp",
                "family_name",
                "newUser",
                "oid",
                "sub",
                "tfp",
                "iss",
                "iat",
                "exp",
                "aud",
                "acr",
                "nonce",
                "auth_time"
              ]
            }
            """#
    }

    /// A second B2C user flow in the same tenant (`B2C_1_passwordreset`): same issuer as
    /// `azureADB2C(base:tenant:policy:tenantID:lowercasePolicy:)` for that tenant, other
    /// endpoints. Useful to check that a client keeps one metadata document per policy.
    /// Sources and caveats as for `azureADB2C`.
    public static func azureADB2CPasswordReset(
        base: String,
        tenant: String,
        tenantID: String = "2d5ab2b4-1c0f-4a6e-9d43-7c1f0e6a8b10"
    ) -> String {
        azureADB2C(base: base, tenant: tenant, policy: "B2C_1_passwordreset", tenantID: tenantID)
    }

    // MARK: Amazon Cognito

    /// An Amazon Cognito user pool. `issuerBase` replaces `https://cognito-idp.<region>.amazonaws.com`
    /// (the issuer is `<issuerBase>/<userPoolID>`, JWKS under it); `domainBase` replaces the
    /// hosted UI domain `https://<prefix>.auth.<region>.amazoncognito.com`, which serves
    /// `/oauth2/authorize`, `/oauth2/token` and `/oauth2/userInfo` (capital I, as published).
    ///
    /// The real document has neither `revocation_endpoint` nor `end_session_endpoint`, although
    /// the domain serves `/oauth2/revoke` and `/logout`; it has no `response_modes_supported`,
    /// `claims_supported` or `code_challenge_methods_supported` either. Cognito serves it
    /// minified on one line with members in alphabetical order; this copy is pretty-printed in
    /// the same order.
    ///
    /// Source: the document embedded in micronaut-projects/micronaut-security
    /// `security-aot/src/test/groovy/io/micronaut/security/aot/OpenIdProviderMetadataFetcherCodeGeneratorSpec.groovy`
    /// (pool `us-east-1_4OqDoWVrZ`); a second public copy (a Tableau/Cognito walkthrough with a
    /// custom domain) has exactly the same members. Some pools list `"token id_token"` in
    /// `response_types_supported` as well (seen in another public copy), depending on the app
    /// clients' allowed flows; that could not be pinned down.
    public static func cognito(
        issuerBase: String,
        domainBase: String,
        userPoolID: String = "us-east-1_4OqDoWVrZ"
    ) -> String {
        #"""
        {
          "authorization_endpoint": "\#(domainBase)/oauth2/authorize",
          "id_token_signing_alg_values_supported": [
            "RS256"
          ],
          "issuer": "\#(issuerBase)/\#(userPoolID)",
          "jwks_uri": "\#(issuerBase)/\#(userPoolID)/.well-known/jwks.json",
          "response_types_supported": [
            "code",
            "token"
          ],
          "scopes_supported": [
            "openid",
            "email",
            "phone",
            "profile"
          ],
          "subject_types_supported": [
            "public"
          ],
          "token_endpoint": "\#(domainBase)/oauth2/token",
          "token_endpoint_auth_methods_supported": [
            "client_secret_basic",
            "client_secret_post"
          ],
          "userinfo_endpoint": "\#(domainBase)/oauth2/userInfo"
        }
        """#
    }

    // MARK: Google

    /// Google. `base` replaces every origin of the real document, which spreads over four hosts:
    /// `https://accounts.google.com` (issuer, `/o/oauth2/v2/auth`), `https://oauth2.googleapis.com`
    /// (`/token`, `/revoke`, `/device/code`), `https://openidconnect.googleapis.com`
    /// (`/v1/userinfo`) and `https://www.googleapis.com` (`/oauth2/v3/certs`). The paths do not
    /// collide, so one fake server can answer them all. The issuer becomes `base` itself.
    ///
    /// It has `revocation_endpoint`, `device_authorization_endpoint` and
    /// `code_challenge_methods_supported` (`plain`, `S256`), and no `end_session_endpoint`.
    ///
    /// Source: panva/wellknown `issuers/google/google.mjs`, a snapshot of
    /// `https://accounts.google.com/.well-known/openid-configuration`.
    public static func google(base: String) -> String {
        #"""
        {
          "issuer": "\#(base)",
          "authorization_endpoint": "\#(base)/o/oauth2/v2/auth",
          "device_authorization_endpoint": "\#(base)/device/code",
          "token_endpoint": "\#(base)/token",
          "userinfo_endpoint": "\#(base)/v1/userinfo",
          "revocation_endpoint": "\#(base)/revoke",
          "jwks_uri": "\#(base)/oauth2/v3/certs",
          "response_types_supported": [
            "code",
            "token",
            "id_token",
            "code token",
            "code id_token",
            "token id_token",
            "code token id_token",
            "none"
          ],
          "subject_types_supported": [
            "public"
          ],
          "id_token_signing_alg_values_supported": [
            "RS256"
          ],
          "scopes_supported": [
            "openid",
            "email",
            "profile"
          ],
          "token_endpoint_auth_methods_supported": [
            "client_secret_post",
            "client_secret_basic"
          ],
          "claims_supported": [
            "aud",
            "email",
            "email_verified",
            "exp",
            "family_name",
            "given_name",
            "iat",
            "iss",
            "name",
            "picture",
            "sub"
          ],
          "code_challenge_methods_supported": [
            "plain",
            "S256"
          ],
          "grant_types_supported": [
            "authorization_code",
            "refresh_token",
            "urn:ietf:params:oauth:grant-type:device_code",
            "urn:ietf:params:oauth:grant-type:jwt-bearer"
          ]
        }
        """#
    }

    // MARK: Yahoo! JAPAN

    /// Yahoo! JAPAN YConnect v2. `base` replaces `https://auth.login.yahoo.co.jp` (issuer
    /// `<base>/yconnect/v2`, `/yconnect/v2/authorization`, `/yconnect/v2/token`,
    /// `/yconnect/v2/jwks`); `userinfoBase` replaces `https://userinfo.yahooapis.jp`
    /// (`/yconnect/v2/attribute`) and defaults to `base`.
    ///
    /// No `revocation_endpoint`, no `end_session_endpoint`, no `grant_types_supported`;
    /// `code_challenge_methods_supported` is `plain` and `S256`.
    ///
    /// Source: shogo82148/goat `oidc/testdata/yahoo-openid-configuration.json`, fetched from
    /// `https://auth.login.yahoo.co.jp/yconnect/v2/.well-known/openid-configuration` by the
    /// repository's own script; matches the member list on Yahoo's documentation page
    /// https://developer.yahoo.co.jp/yconnect/v2/hybrid/configuration.html, except that the real
    /// document lists `"public", "pairwise"` in `subject_types_supported` where the page shows
    /// only `"public"`.
    public static func yahooJapan(base: String, userinfoBase: String? = nil) -> String {
        let userinfo = userinfoBase ?? base
        return #"""
            {
              "issuer": "\#(base)/yconnect/v2",
              "authorization_endpoint": "\#(base)/yconnect/v2/authorization",
              "token_endpoint": "\#(base)/yconnect/v2/token",
              "userinfo_endpoint": "\#(userinfo)/yconnect/v2/attribute",
              "jwks_uri": "\#(base)/yconnect/v2/jwks",
              "response_types_supported": [
                "code",
                "token",
                "id_token",
                "code token",
                "code id_token",
                "token id_token",
                "code token id_token"
              ],
              "subject_types_supported": [
                "public",
                "pairwise"
              ],
              "id_token_signing_alg_values_supported": [
                "RS256"
              ],
              "scopes_supported": [
                "openid",
                "email",
                "profile",
                "address"
              ],
              "token_endpoint_auth_methods_supported": [
                "client_secret_post",
                "client_secret_basic"
              ],
              "claims_supported": [
                "sub",
                "name",
                "given_name",
                "family_name",
                "email",
                "email_verified",
                "gender",
                "birthdate",
                "zoneinfo",
                "locale",
                "address",
                "iss",
                "aud",
                "exp",
                "iat",
                "nickname",
                "picture"
              ],
              "display_values_supported": [
                "page",
                "popup",
                "touch"
              ],
              "service_documentation": "https://developer.yahoo.co.jp/yconnect/",
              "claims_locales_supported": [
                "ja-JP"
              ],
              "ui_locales_supported": [
                "ja-JP"
              ],
              "op_policy_uri": "https://developer.yahoo.co.jp/yconnect/v2/guideline.html",
              "op_tos_uri": "https://developer.yahoo.co.jp/yconnect/v2/guideline.html",
              "code_challenge_methods_supported": [
                "plain",
                "S256"
              ]
            }
            """#
    }
}
