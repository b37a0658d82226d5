/// Where a stream of WebSocket frames (RFC 6455 §5.2) is, byte by byte: in a frame's header,
/// in its payload, or between two frames. The relay reads headers only (never payloads), so
/// that it can put a close frame of its own between two frames, and so that it knows whether
/// a side has sent its close frame already.
struct WebSocketFrameTracker {
    /// Header bytes of the current frame seen so far (up to 14).
    private var header: [UInt8] = []
    /// Payload bytes of the current frame still to come (once its header is complete).
    private var payloadLeft: UInt64 = 0
    private var inPayload = false
    /// A close frame (opcode 8) has passed.
    private(set) var closeSeen = false

    init() {
        header.reserveCapacity(14)
    }

    /// Between two frames: a frame could start with the next byte.
    var atBoundary: Bool { !inPayload && header.isEmpty }

    /// How many bytes may pass before the current frame ends, at most (1 while its header is
    /// incomplete, as its length is not known yet; 0 at a boundary).
    var bytesToBoundary: Int {
        if inPayload { return Int(clamping: payloadLeft) }
        return header.isEmpty ? 0 : 1
    }

    /// Follows `bytes` as they pass.
    mutating func pass(_ bytes: UnsafeRawBufferPointer) {
        var index = 0
        while index < bytes.count {
            if inPayload {
                let step = Int(min(UInt64(bytes.count - index), payloadLeft))
                payloadLeft -= UInt64(step)
                index += step
                if payloadLeft == 0 { inPayload = false }
                continue
            }
            header.append(bytes[index])
            index += 1
            guard let length = headerLength, header.count == length else { continue }
            if header[0] & 0x0F == 0x08 { closeSeen = true }
            payloadLeft = payloadLength
            header.removeAll(keepingCapacity: true)
            inPayload = payloadLeft > 0
        }
    }

    /// The header's full length once its first two bytes are known.
    private var headerLength: Int? {
        guard header.count >= 2 else { return nil }
        let masked = header[1] & 0x80 != 0
        let short = header[1] & 0x7F
        let extended = short == 126 ? 2 : short == 127 ? 8 : 0
        return 2 + extended + (masked ? 4 : 0)
    }

    private var payloadLength: UInt64 {
        let short = header[1] & 0x7F
        switch short {
        case 126: return UInt64(header[2]) << 8 | UInt64(header[3])
        case 127: return (2..<10).reduce(UInt64(0)) { $0 << 8 | UInt64(header[$1]) }
        default: return UInt64(short)
        }
    }
}

enum WebSocketFrames {
    /// Going away (the instance shuts down).
    static let goingAway: UInt16 = 1001
    /// Policy violation (the session ended: the connection may not go on).
    static let policyViolation: UInt16 = 1008

    /// A close frame with `code` and `reason` (at most 123 bytes of it), masked with `mask` when
    /// it goes to a server (RFC 6455 §5.3: a client masks every frame), unmasked to a client.
    static func close(code: UInt16, reason: String, mask: (UInt8, UInt8, UInt8, UInt8)?) -> [UInt8] {
        var payload = [UInt8(code >> 8), UInt8(code & 0xFF)]
        payload.append(contentsOf: reason.utf8.prefix(123))
        var frame: [UInt8] = [0x88, UInt8(payload.count) | (mask == nil ? 0 : 0x80)]
        guard let mask else { return frame + payload }
        let key = [mask.0, mask.1, mask.2, mask.3]
        frame.append(contentsOf: key)
        for (index, byte) in payload.enumerated() { frame.append(byte ^ key[index & 3]) }
        return frame
    }
}
