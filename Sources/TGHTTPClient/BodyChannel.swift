import TGBase

/// A bounded, lock-protected queue of byte chunks between a streamed request body's producer (the
/// caller's task, through ``HTTPClientBodyWriter``) and libcurl's read callback on the event thread.
///
/// The producer waits while `highWater` bytes or more are queued, until libcurl's reads bring the
/// queue down to `highWater / 2`.
final class BodyChannel: @unchecked Sendable {
    // Invariant: every field is only accessed with `lock` held.
    // A pthread lock, not Mutex: taken in libcurl's callbacks on the event threads too, where
    // ThreadSanitizer reports Mutex hand-offs with Swift tasks falsely (docs/c-libraries.md).
    private let lock = Lock()
    private var chunks: [[UInt8]] = []
    private var head = 0
    private var offset = 0
    private(set) var buffered = 0
    private var finished = false
    private var failure: (any Error)?
    private var producerBlocked = false
    private var producerWaiter: CheckedContinuation<Bool?, Never>?
    let highWater: Int

    init(highWater: Int) { self.highWater = highWater }

    /// Adds a chunk, waiting while the queue is over its high-water mark.
    /// Returns false when the channel was finished meanwhile (the transfer is over).
    func send(_ chunk: [UInt8]) async -> Bool {
        while true {
            let accepted: Bool? = await withCheckedContinuation { (continuation: CheckedContinuation<Bool?, Never>) in
                lock.lock()
                if finished {
                    lock.unlock()
                    continuation.resume(returning: nil)
                } else if buffered < highWater {
                    chunks.append(chunk)
                    buffered += chunk.count
                    lock.unlock()
                    continuation.resume(returning: true)
                } else {
                    producerBlocked = true
                    producerWaiter = continuation
                    lock.unlock()
                }
            }
            guard let accepted else { return false }
            if accepted { return true }
        }
    }

    /// The end of the body (`error`: the producer failed, see ``hasFailed``), or of the transfer:
    /// a producer still waiting is let go (``send(_:)`` returns false).
    func finish(error: (any Error)? = nil) {
        lock.lock()
        guard !finished else {
            lock.unlock()
            return
        }
        finished = true
        failure = error
        let producer = producerWaiter
        producerWaiter = nil
        lock.unlock()
        producer?.resume(returning: false)
    }

    /// The producer finished with an error.
    var hasFailed: Bool { lock.withLock { failure != nil } }

    /// Copies up to `capacity` bytes into `destination` (for libcurl's read callback): the count,
    /// 0 at the end, nil when nothing is ready yet.
    func read(into destination: UnsafeMutableRawPointer, capacity: Int) -> Int? {
        lock.lock()
        var copied = 0
        while copied < capacity, head < chunks.count {
            let chunk = chunks[head]
            let count = min(capacity - copied, chunk.count - offset)
            chunk.withUnsafeBytes { raw in
                (destination + copied).copyMemory(from: raw.baseAddress! + offset, byteCount: count)
            }
            copied += count
            offset += count
            buffered -= count
            if offset == chunk.count {
                head += 1
                offset = 0
            }
        }
        compactLocked()
        drainedLocked()
        let ended = finished && head == chunks.count
        lock.unlock()
        if copied > 0 { return copied }
        return ended ? 0 : nil
    }

    private func compactLocked() {
        if head > 64 || head == chunks.count {
            chunks.removeFirst(head)
            head = 0
        }
    }

    /// Lets a blocked producer try again once the queue is down to half its high-water mark.
    private func drainedLocked() {
        guard producerBlocked, buffered <= highWater / 2 else { return }
        producerBlocked = false
        if let producer = producerWaiter {
            producerWaiter = nil
            producer.resume(returning: false)
        }
    }
}
