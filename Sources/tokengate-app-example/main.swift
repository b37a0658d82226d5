// An app's side of `make dev`, in Swift: the TokenGateClient library signs alice in, calls the
// gateway and the API behind it with a DPoP-bound token, keeps a transfer code, and logs out.
// The browser is played by `DevProviderBrowser` (the development provider's login form is one
// field); on a phone it is `WebAuthenticationBrowserSession`. `scripts/app-example.sh` runs it;
// DevWalkthroughTests runs that against `make dev`.
//
//   tokengate-app-example [GATEWAY_URL] [USER]
import Foundation
import TokenGateClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let arguments = CommandLine.arguments.dropFirst()
let gateway = URL(string: arguments.first ?? "http://127.0.0.1:8080")!
let user = arguments.dropFirst().first ?? "alice"
let state = FileManager.default.temporaryDirectory.appendingPathComponent("tokengate-app-example-\(getpid())")
defer { try? FileManager.default.removeItem(at: state) }

let client = TokenGateClient(
    configuration: TokenGateClient.Configuration(
        gatewayURL: gateway,
        clientID: "dev-app",
        redirectURI: "com.example.dev:/oauth",
        usesDPoP: true
    ),
    browser: DevProviderBrowser(user: user),
    credentials: try FileCredentialStore(directory: state.appendingPathComponent("credentials")),
    transfers: FileTransferStore(file: state.appendingPathComponent("transfer.json"))
)

func show(_ path: String) async throws {
    let (data, response) = try await client.data(for: URLRequest(url: gateway.appendingPathComponent(path)))
    print("\(path): \(response.statusCode) \(String(decoding: data, as: UTF8.self))")
}

do {
    let account = try await client.signIn()
    print("signed in: \(account.subject) at \(account.provider)")
    let token = try await client.accessToken()
    print("token_type: \(token.tokenType)")
    try await show("auth/me")
    try await show("api/graph/me")
    let transfer = try await client.prepareTransferCode()
    print("transfer code kept, \(transfer.code.count) characters")
    let logout = try await client.logOut(.device)
    print("logged out: \(logout.sessionsEnded) session(s) ended")
    print("accounts left: \(try await client.accounts().count)")
} catch {
    print("failed: \(error)")
    exit(1)
}
