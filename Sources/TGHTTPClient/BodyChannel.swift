import Foundation

/// A bounded, lock-protected queue of byte chunks between a producer and a consumer on different
/// threads, used both ways: response bodies (libcurl's write callback → the caller's `for await`)
/// and streamed request bodies (the caller's sequence → libcurl's read callback).
///
/// The producer is told to stop when more than `highWater` bytes wait; `onDrained` fires once the
/// consumer brings the queue down to `highWater / 2`, so the producer can resume.
final class BodyChannel: @unchecked Sendable {
    // Invariant: every field is only accessed with `lock` held.
    // NSLock, not Mutex: taken in libcurl's callbacks on the event threads too, where
    // ThreadSanitizer reports Mutex hand-offs with Swift tasks falsely (docs/c-libraries.md).
    private let lock = NSLock()
    private var chunks: [[UInt8]] = []
    private var head = 0
    private var offset = 0
    private(set) var buffered = 0
    private var finished = false
    private var failure: (any Error)?
    private var consumer: CheckedContinuation<[UInt8]?, any Error>?
    private var producerBlocked = false
    private var producerWaiter: CheckedContinuation<Bool?, Never>?
    let highWater: Int
    /// Called (outside the lock) when a blocked producer may continue.
    var onDrained: (@Sendable () -> Void)?

    init(highWater: Int) { self.highWater = highWater }

    /// Adds a chunk unless the queue is over its high-water mark; false means "try again after
    /// `onDrained`" (the chunk was not taken).
    func offer(_ chunk: [UInt8]) -> Bool {
        lock.lock()
        if buffered >= highWater {
            producerBlocked = true
            lock.unlock()
            return false
        }
        if let waiting = consumer {
            consumer = nil
            lock.unlock()
            waiting.resume(returning: chunk)
            return true
        }
        chunks.append(chunk)
        buffered += chunk.count
        lock.unlock()
        return true
    }

    /// Adds a chunk, waiting while the queue is over its high-water mark (for async producers).
    /// Returns false when the stream was finished meanwhile (the consumer is gone).
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

    /// The end of the stream; `error` fails the consumer instead, once buffered chunks are read.
    func finish(error: (any Error)? = nil) {
        lock.lock()
        guard !finished else {
            lock.unlock()
            return
        }
        finished = true
        failure = error
        let waiting = consumer
        consumer = nil
        let producer = producerWaiter
        producerWaiter = nil
        lock.unlock()
        producer?.resume(returning: false)
        if let waiting {
            if let error { waiting.resume(throwing: error) } else { waiting.resume(returning: nil) }
        }
    }

    var isFinished: Bool { lock.withLock { finished } }

    /// The producer finished with an error.
    var hasFailed: Bool { lock.withLock { failure != nil } }

    /// The next chunk, nil at the end; throws the producer's failure.
    func next() async throws -> [UInt8]? {
        try await withCheckedThrowingContinuation { continuation in
            lock.lock()
            if head < chunks.count {
                let chunk = takeLocked()
                let wake = drainedLocked()
                lock.unlock()
                continuation.resume(returning: chunk)
                if wake { onDrained?() }
                return
            }
            if finished {
                let failure = self.failure
                lock.unlock()
                if let failure { continuation.resume(throwing: failure) } else { continuation.resume(returning: nil) }
                return
            }
            consumer = continuation
            lock.unlock()
        }
    }

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
        let wake = drainedLocked()
        let ended = finished && head == chunks.count
        lock.unlock()
        if wake { onDrained?() }
        if copied > 0 { return copied }
        return ended ? 0 : nil
    }

    private func takeLocked() -> [UInt8] {
        var chunk = chunks[head]
        if offset > 0 { chunk.removeFirst(offset) }
        buffered -= chunk.count
        head += 1
        offset = 0
        compactLocked()
        return chunk
    }

    private func compactLocked() {
        if head > 64 || head == chunks.count {
            chunks.removeFirst(head)
            head = 0
        }
    }

    private func drainedLocked() -> Bool {
        guard producerBlocked, buffered <= highWater / 2 else { return false }
        producerBlocked = false
        if let producer = producerWaiter {
            producerWaiter = nil
            producer.resume(returning: false)
        }
        return true
    }
}
