import Foundation
import Synchronization
import TGAppTesting
import TGTesting
import Testing
import TokenGateClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The app library's side of a step-up (RFC 9470): an API's challenge comes back typed, with no
/// refresh and no retry, and `stepUp` signs the same account in again as asked.
@Suite struct ClientLibraryStepUpTests {
    @Test func anAPIsStepUpComesBackTypedAndStepUpSignsTheSameAccountInAgain() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: StepUpTests.paths, transport: .sockets) { h in
            try StepUpTests.demandMFA(h)
            let app = AppInstall(h)
            let alice = try await app.client.signIn()
            let refreshes = app.transport.count("refresh_token")
            await #expect(throws: TokenGateClientError.stepUpRequired(StepUpChallenge(acrValues: StepUpTests.mfa, maxAge: 300, resource: "graph"))) {
                _ = try await app.client.data(for: app.request(h, "/api/graph/me"))
            }
            #expect(app.transport.count("refresh_token") == refreshes, "a step-up is not answered with a refresh")

            let challenge = StepUpChallenge(acrValues: StepUpTests.mfa, maxAge: 300, resource: "graph")
            let stepped = try await app.client.stepUp(challenge)
            #expect(stepped.id == alice.id)
            #expect(try await app.client.accounts() == [stepped])
            let opened = try #require(app.browser.opened.withLock { $0.last })
            let query = URLComponents(url: opened, resolvingAgainstBaseURL: false)?.queryItems ?? []
            for (name, value) in [("acr_values", StepUpTests.mfa), ("max_age", "300"), ("resource", "graph"), ("account", alice.id)] {
                #expect(query.contains(URLQueryItem(name: name, value: value)), "\(name)")
            }
            let (_, answer) = try await app.client.data(for: app.request(h, "/api/graph/me"))
            #expect(answer.statusCode == 200)
        }
    }
}
