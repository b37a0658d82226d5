import Foundation
import Synchronization

/// Sends many small requests as one statement (group commit): while one statement runs, the
/// requests that arrive wait and go together in the next. No timer: a request that finds nothing
/// running goes at once, so an idle process adds no latency and a busy one sends a statement per
/// round trip rather than per request. With `distinct`, requests with the same key never share a
/// statement: a second one waits for the next.
public final class GroupCommit<Input: Sendable, Output: Sendable>: Sendable {
    /// The requests waiting for the next statement, and whether a drain is running.
    private let state = Mutex<(pending: [Waiter], running: Bool)>(([], false))
    private let maxBatch: Int
    private let distinct: (@Sendable (Input) -> String)?
    /// One statement for a batch: one output per input, in order; or the error that failed it.
    private let statement: @Sendable ([Input]) async -> Result<[Output], any Error>

    private struct Waiter: Sendable {
        var input: Input
        var continuation: CheckedContinuation<Result<Output, any Error>, Never>
    }

    public init(
        maxBatch: Int = 256,
        distinct: (@Sendable (Input) -> String)? = nil,
        statement: @escaping @Sendable ([Input]) async -> Result<[Output], any Error>
    ) {
        self.maxBatch = max(1, maxBatch)
        self.distinct = distinct
        self.statement = statement
    }

    /// Requests waiting for the next statement (tests).
    public var waiting: Int { state.withLock { $0.pending.count } }

    /// `input`'s output from the next statement, or the error that failed that statement.
    public func submit(_ input: Input) async -> Result<Output, any Error> {
        await withCheckedContinuation { continuation in
            let starts: Bool = state.withLock { state in
                state.pending.append(Waiter(input: input, continuation: continuation))
                guard !state.running else { return false }
                state.running = true
                return true
            }
            if starts { Task { await self.drain() } }
        }
    }

    /// Sends what is pending, statement after statement, until nothing is.
    private func drain() async {
        while true {
            let batch: [Waiter] = state.withLock { state in
                var batch: [Waiter] = []
                var rest: [Waiter] = []
                var keys = Set<String>()
                for waiter in state.pending {
                    let fits = batch.count < maxBatch && (distinct.map { keys.insert($0(waiter.input)).inserted } ?? true)
                    if fits { batch.append(waiter) } else { rest.append(waiter) }
                }
                state.pending = rest
                if batch.isEmpty { state.running = false }
                return batch
            }
            guard !batch.isEmpty else { return }
            switch await statement(batch.map(\.input)) {
            case .success(let outputs) where outputs.count == batch.count:
                for (waiter, output) in zip(batch, outputs) { waiter.continuation.resume(returning: .success(output)) }
            case .success:
                for waiter in batch { waiter.continuation.resume(returning: .failure(GroupCommitError.outputCountMismatch)) }
            case .failure(let error):
                for waiter in batch { waiter.continuation.resume(returning: .failure(error)) }
            }
        }
    }
}

/// A statement of a ``GroupCommit`` answered for another number of inputs than it was given.
public enum GroupCommitError: Error, Equatable {
    case outputCountMismatch
}
