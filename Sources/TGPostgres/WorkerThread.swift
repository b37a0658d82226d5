import Foundation

/// A thread of its own that runs submitted jobs one at a time: the one home of blocking libpq calls.
///
/// Blocking calls never run on Swift's cooperative pool (one thread per core: a few slow queries
/// would stall every task) nor on Dispatch's global queues (on Linux they share threads with that
/// pool). Each connection owns one worker, so a slow query delays only its own connection.
final class WorkerThread: @unchecked Sendable {
    // Invariant: `jobs` and `stopping` are only accessed with `condition` locked; the thread is
    // started once in init and exits after `stop()` once the queue is empty.
    // A condition variable (the thread sleeps until a job comes), which Mutex lacks.
    private let condition = NSCondition()
    private var jobs: [() -> Void] = []
    private var stopping = false

    init(name: String) {
        let thread = Thread { [self] in self.loop() }
        thread.name = name
        thread.stackSize = 512 * 1024
        thread.start()
    }

    func submit(_ job: @escaping () -> Void) {
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Runs `work` on the worker thread and returns its result to the awaiting task.
    func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            submit { continuation.resume(with: Result { try work() }) }
        }
    }

    /// Lets queued jobs finish, then ends the thread.
    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while jobs.isEmpty, !stopping { condition.wait() }
            if jobs.isEmpty, stopping {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job()
        }
    }
}
