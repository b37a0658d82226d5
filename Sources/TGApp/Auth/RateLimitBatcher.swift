import TGBase
import TGStore

/// Takes from the shared rate-limit buckets for many client addresses in one statement: a
/// ``GroupCommit`` where a client appears at most once a statement (its second take waits for the
/// next). An idle instance adds no latency; a busy one sends a statement per round trip rather
/// than per address.
final class RateLimitBatcher: Sendable {
    private struct Want: Sendable {
        var client: String
        var want: Int
    }

    private let commit: GroupCommit<Want, RateLimitStore.Take?>

    /// `statement`: the tokens each client asked for (one entry per client) in; the takes out, or
    /// nil when it failed.
    init(maxBatch: Int = 256, statement: @escaping @Sendable ([String: Int]) async -> [String: RateLimitStore.Take]?) {
        commit = GroupCommit(
            maxBatch: maxBatch,
            distinct: { $0.client },
            statement: { wants in
                let takes = await statement(Dictionary(uniqueKeysWithValues: wants.map { ($0.client, $0.want) }))
                return .success(wants.map { takes?[$0.client] })
            }
        )
    }

    /// Takes waiting for the next statement (tests).
    var waiting: Int { commit.waiting }

    /// Up to `want` tokens for `client`, in the next statement; nil when that statement failed.
    func take(_ client: String, want: Int) async -> RateLimitStore.Take? {
        (try? await commit.submit(Want(client: client, want: want)).get()) ?? nil
    }
}
