/// Body bytes waiting to be copied out, in the chunks they came in: appended whole, read into
/// whatever buffer the reader offers, without joining them (a streamed body is relayed through
/// one of these on each side of the proxy). Not thread-safe: its owner serialises access.
public struct ChunkQueue: Sendable {
    // Invariant: `oldest` is empty only when no chunk waits (then `later` holds none from
    // `nextLater` on either).
    /// The oldest chunk waiting, read from `offset`: most bodies that pass through are one
    /// chunk, held here without an array of chunks to allocate.
    private var oldest: [UInt8] = []
    private var offset = 0
    /// The chunks after it, from `nextLater` on.
    private var later: [[UInt8]] = []
    private var nextLater = 0
    /// Bytes waiting.
    public private(set) var count = 0

    public init() {}

    public var isEmpty: Bool { count == 0 }

    public mutating func append(_ chunk: [UInt8]) {
        guard !chunk.isEmpty else { return }
        if oldest.isEmpty {
            oldest = chunk
        } else {
            later.append(chunk)
        }
        count += chunk.count
    }

    /// Copies up to `buffer.count` waiting bytes into `buffer`, oldest first; returns how many.
    public mutating func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var copied = 0
        while copied < buffer.count, !oldest.isEmpty {
            let length = min(buffer.count - copied, oldest.count - offset)
            oldest.withUnsafeBytes { raw in
                (buffer.baseAddress! + copied).copyMemory(from: raw.baseAddress! + offset, byteCount: length)
            }
            copied += length
            offset += length
            if offset == oldest.count { nextChunk() }
        }
        count -= copied
        return copied
    }

    /// The oldest chunk is spent: the next one takes its place.
    private mutating func nextChunk() {
        offset = 0
        guard nextLater < later.count else {
            oldest = []
            return
        }
        oldest = later[nextLater]
        nextLater += 1
        // Spent chunks are dropped in batches (removing the first of an array moves the rest).
        if nextLater == later.count {
            later.removeAll(keepingCapacity: true)
            nextLater = 0
        } else if nextLater > 64 {
            later.removeFirst(nextLater)
            nextLater = 0
        }
    }

    /// Every waiting byte at once, and the queue emptied (a small body known to be complete):
    /// the one chunk itself when there is only one.
    public mutating func takeAll() -> [UInt8] {
        defer { self = ChunkQueue() }
        if nextLater == later.count, offset == 0 { return oldest }
        var whole: [UInt8] = []
        whole.reserveCapacity(count)
        whole.append(contentsOf: oldest[offset...])
        for chunk in later[nextLater...] { whole.append(contentsOf: chunk) }
        return whole
    }

    /// Drops everything waiting.
    public mutating func removeAll() { self = ChunkQueue() }
}
