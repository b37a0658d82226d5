import Foundation

/// One WebSocket frame (RFC 6455, section 5.2): the FIN bit, the opcode and the payload, unmasked.
public struct WebSocketFrame: Sendable, Equatable {
    public var fin: Bool
    public var opcode: UInt8
    public var payload: [UInt8]

    public init(fin: Bool = true, opcode: UInt8, payload: [UInt8]) {
        self.fin = fin
        self.opcode = opcode
        self.payload = payload
    }

    /// A text frame (opcode 1) with `s` as UTF-8.
    public static func text(_ s: String) -> WebSocketFrame { WebSocketFrame(opcode: 1, payload: Array(s.utf8)) }

    /// A binary frame (opcode 2).
    public static func binary(_ b: [UInt8]) -> WebSocketFrame { WebSocketFrame(opcode: 2, payload: b) }

    /// A ping (opcode 9).
    public static func ping(_ b: [UInt8]) -> WebSocketFrame { WebSocketFrame(opcode: 9, payload: b) }

    /// A pong (opcode 10).
    public static func pong(_ b: [UInt8]) -> WebSocketFrame { WebSocketFrame(opcode: 10, payload: b) }

    /// A close frame (opcode 8): the status code, big-endian, then the reason as UTF-8.
    public static func close(code: UInt16, reason: String) -> WebSocketFrame {
        WebSocketFrame(opcode: 8, payload: [UInt8(code >> 8), UInt8(code & 0xFF)] + Array(reason.utf8))
    }

    /// A close frame's status code; nil for other frames and for a close frame without one.
    public var closeCode: UInt16? {
        guard opcode == 8, payload.count >= 2 else { return nil }
        return UInt16(payload[0]) << 8 | UInt16(payload[1])
    }

    /// A close frame's reason (empty when it has none, and for other frames).
    public var closeReason: String {
        guard opcode == 8, payload.count > 2 else { return "" }
        return String(decoding: payload[2...], as: UTF8.self)
    }

    /// The payload as UTF-8; nil when it is not valid UTF-8.
    public var text: String? { String(validating: payload, as: UTF8.self) }
}

/// Encoding and decoding of WebSocket frames and the handshake's values, for test peers.
public enum WebSocketFrames {
    /// The GUID RFC 6455 appends to a key before hashing it (section 1.3).
    static let handshakeGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// Encodes `frame`: with a random 4-byte mask when `masked` (a client's frames to a server),
    /// and its length in 7, 16 or 64 bits, whichever fits.
    public static func encode(_ frame: WebSocketFrame, masked: Bool) -> [UInt8] {
        var bytes: [UInt8] = [(frame.fin ? 0x80 : 0) | (frame.opcode & 0x0F)]
        let maskBit: UInt8 = masked ? 0x80 : 0
        let count = frame.payload.count
        if count < 126 {
            bytes.append(maskBit | UInt8(count))
        } else if count <= 0xFFFF {
            bytes += [maskBit | 126, UInt8(count >> 8), UInt8(count & 0xFF)]
        } else {
            bytes.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: UInt64(count) >> UInt64(shift))) }
        }
        guard masked else { return bytes + frame.payload }
        let mask = (0..<4).map { _ in UInt8.random(in: .min ... .max) }
        bytes += mask
        bytes.reserveCapacity(bytes.count + count)
        for (index, byte) in frame.payload.enumerated() { bytes.append(byte ^ mask[index & 3]) }
        return bytes
    }

    /// Takes the first whole frame off the front of `buffer`, unmasked, and whether it was masked;
    /// nil (and `buffer` left as it is) while the frame is not complete yet. Throws
    /// ``WebSocketTestError/protocolError(_:)`` for a length RFC 6455 does not allow.
    public static func decode(_ buffer: inout [UInt8]) throws -> (frame: WebSocketFrame, masked: Bool)? {
        guard buffer.count >= 2 else { return nil }
        let fin = buffer[0] & 0x80 != 0
        let opcode = buffer[0] & 0x0F
        let masked = buffer[1] & 0x80 != 0
        var offset = 2
        var length = UInt64(buffer[1] & 0x7F)
        if length == 126 {
            guard buffer.count >= 4 else { return nil }
            length = UInt64(buffer[2]) << 8 | UInt64(buffer[3])
            offset = 4
        } else if length == 127 {
            guard buffer.count >= 10 else { return nil }
            length = buffer[2..<10].reduce(0) { $0 << 8 | UInt64($1) }
            offset = 10
            guard length >> 63 == 0 else { throw WebSocketTestError.protocolError("64-bit length with its top bit set") }
        }
        guard length <= UInt64(Int.max - offset - 4) else { throw WebSocketTestError.protocolError("frame too long") }
        let maskOffset = offset
        if masked { offset += 4 }
        guard buffer.count >= offset + Int(length) else { return nil }
        var payload = Array(buffer[offset..<offset + Int(length)])
        if masked {
            let mask = Array(buffer[maskOffset..<maskOffset + 4])
            for index in payload.indices { payload[index] ^= mask[index & 3] }
        }
        buffer.removeFirst(offset + Int(length))
        return (WebSocketFrame(fin: fin, opcode: opcode, payload: payload), masked)
    }

    /// `Sec-WebSocket-Accept` for `key`: base64(SHA-1(key + the RFC 6455 GUID)).
    public static func acceptValue(forKey key: String) -> String {
        Data(sha1(Array((key + handshakeGUID).utf8))).base64EncodedString()
    }

    /// A fresh `Sec-WebSocket-Key`: 16 random bytes, base64.
    public static func randomKey() -> String {
        Data((0..<16).map { _ in UInt8.random(in: .min ... .max) }).base64EncodedString()
    }

    /// SHA-1 (FIPS 180-4). For the handshake's accept value in test peers only: nothing that needs
    /// a secure hash may use it.
    static func sha1(_ message: [UInt8]) -> [UInt8] {
        var state: [UInt32] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0]
        var data = message
        data.append(0x80)
        while data.count % 64 != 56 { data.append(0) }
        let bits = UInt64(message.count) * 8
        for shift in stride(from: 56, through: 0, by: -8) { data.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        var words = [UInt32](repeating: 0, count: 80)
        for block in stride(from: 0, to: data.count, by: 64) {
            for index in 0..<16 {
                words[index] = data[(block + 4 * index)..<(block + 4 * index + 4)].reduce(0) { $0 << 8 | UInt32($1) }
            }
            for index in 16..<80 {
                words[index] = rotate(words[index - 3] ^ words[index - 8] ^ words[index - 14] ^ words[index - 16], by: 1)
            }
            var (a, b, c, d, e) = (state[0], state[1], state[2], state[3], state[4])
            for index in 0..<80 {
                let mixed: UInt32
                let constant: UInt32
                switch index {
                case 0..<20: (mixed, constant) = ((b & c) | (~b & d), 0x5A82_7999)
                case 20..<40: (mixed, constant) = (b ^ c ^ d, 0x6ED9_EBA1)
                case 40..<60: (mixed, constant) = ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC)
                default: (mixed, constant) = (b ^ c ^ d, 0xCA62_C1D6)
                }
                let next = rotate(a, by: 5) &+ mixed &+ e &+ constant &+ words[index]
                (e, d, c, b, a) = (d, c, rotate(b, by: 30), a, next)
            }
            for (index, value) in [a, b, c, d, e].enumerated() { state[index] &+= value }
        }
        return state.flatMap { word in [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: word >> UInt32($0)) } }
    }

    private static func rotate(_ value: UInt32, by count: UInt32) -> UInt32 { value << count | value >> (32 - count) }
}
