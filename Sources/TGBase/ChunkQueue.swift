/// Body bytes waiting to be copied out, in the chunks they came in: appended whole, read into
/// whatever buffer the reader offers, without joining them (a streamed body is relayed through
/// one of these on each side of the proxy). Not thread-safe: its owner serialises access.
public struct ChunkQueue: Sendable {
    private var chunks: [[UInt8]] = []
    private var firstChunk = 0
    private var offset = 0
    /// Bytes waiting.
    public private(set) var count = 0

    public init() {}

    public var isEmpty: Bool { count == 0 }

    public mutating func append(_ chunk: [UInt8]) {
        guard !chunk.isEmpty else { return }
        chunks.append(chunk)
        count += chunk.count
    }

    /// Copies up to `buffer.count` waiting bytes into `buffer`, oldest first; returns how many.
    public mutating func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var copied = 0
        while copied < buffer.count, firstChunk < chunks.count {
            let chunk = chunks[firstChunk]
            let length = min(buffer.count - copied, chunk.count - offset)
            chunk.withUnsafeBytes { raw in
                (buffer.baseAddress! + copied).copyMemory(from: raw.baseAddress! + offset, byteCount: length)
            }
            copied += length
            offset += length
            if offset == chunk.count {
                firstChunk += 1
                offset = 0
            }
        }
        count -= copied
        // Spent chunks are dropped in batches (removing the first of an array moves the rest).
        if firstChunk > 64 || firstChunk == chunks.count {
            chunks.removeFirst(firstChunk)
            firstChunk = 0
        }
        return copied
    }

    /// Every waiting byte at once, and the queue emptied (a small body known to be complete):
    /// the one chunk itself when there is only one.
    public mutating func takeAll() -> [UInt8] {
        defer { self = ChunkQueue() }
        if chunks.count - firstChunk == 1, offset == 0 { return chunks[firstChunk] }
        var whole: [UInt8] = []
        whole.reserveCapacity(count)
        for chunk in chunks[firstChunk...] { whole.append(contentsOf: chunk) }
        if offset > 0 { whole.removeFirst(offset) }
        return whole
    }

    /// Drops everything waiting.
    public mutating func removeAll() { self = ChunkQueue() }
}
