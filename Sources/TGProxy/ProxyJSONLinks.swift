import TGBase

/// The links to an API in one of its JSON bodies, made TokenGate's (``ProxyLocation``'s rule):
/// a pure function of the body's bytes.
///
/// The body is read as JSON (RFC 8259), token by token, without building values: every string
/// value, at any depth (in objects and arrays; object keys are names, not links), is decoded
/// (`\/`, `\u002F`, `\u0026`, surrogate pairs, ...) and tested; a string that names the API is
/// written again, and nothing else changes: every other byte, whitespace and escape of the body
/// stays as it was. A string written again keeps its escaping style where it can: a body that
/// wrote `\/` gets `\/`, characters the string wrote as `\u00XX` are written so again, and a string
/// that escaped non-ASCII characters keeps them escaped. A body that is not valid JSON (or not one
/// whole value) is left as it is.
enum ProxyJSONLinks {
    enum Outcome: Equatable {
        /// At least one link became TokenGate's: the new body.
        case rewritten([UInt8])
        /// Valid JSON with no link to the API.
        case unchanged
        /// Not one valid JSON value.
        case invalid
    }

    static func rewrite(_ body: [UInt8], with location: ProxyLocation) -> Outcome {
        body.withUnsafeBufferPointer { bytes in
            var scanner = Scanner(bytes: bytes, location: location)
            guard scanner.scan() else { return .invalid }
            guard !scanner.replacements.isEmpty else { return .unchanged }
            var output: [UInt8] = []
            output.reserveCapacity(bytes.count + scanner.replacements.reduce(0) { $0 + $1.bytes.count - $1.range.count })
            var copied = 0
            for replacement in scanner.replacements {
                output.append(contentsOf: bytes[copied..<replacement.range.lowerBound])
                output.append(contentsOf: replacement.bytes)
                copied = replacement.range.upperBound
            }
            output.append(contentsOf: bytes[copied...])
            return .rewritten(output)
        }
    }

    /// A string literal to put in place of another (quotes included).
    struct Replacement {
        var range: Range<Int>
        var bytes: [UInt8]
    }

    /// One pass over the body: checks its grammar and collects the strings to write again.
    /// Iterative (a stack of open containers, not recursion): a deeply nested body cannot exhaust
    /// the event loop's stack.
    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        let location: ProxyLocation
        var index = 0
        var replacements: [Replacement] = []

        init(bytes: UnsafeBufferPointer<UInt8>, location: ProxyLocation) {
            self.bytes = bytes
            self.location = location
        }

        /// Whether the body is one JSON value, with whitespace around it only.
        mutating func scan() -> Bool {
            // Open containers, innermost last: true for an object.
            var open: [Bool] = []
            // Whether a value is due (else a `,` or the end of the container).
            var valueDue = true
            while true {
                skipWhitespace()
                if valueDue {
                    guard index < bytes.count else { return false }
                    switch bytes[index] {
                    case UInt8(ascii: "{"):
                        index += 1
                        skipWhitespace()
                        if peek(UInt8(ascii: "}")) {
                            index += 1
                            valueDue = false
                        } else {
                            open.append(true)
                            guard member() else { return false }
                        }
                    case UInt8(ascii: "["):
                        index += 1
                        skipWhitespace()
                        if peek(UInt8(ascii: "]")) {
                            index += 1
                            valueDue = false
                        } else {
                            open.append(false)
                        }
                    case UInt8(ascii: "\""):
                        guard stringValue() else { return false }
                        valueDue = false
                    case UInt8(ascii: "t"):
                        guard literal("true") else { return false }
                        valueDue = false
                    case UInt8(ascii: "f"):
                        guard literal("false") else { return false }
                        valueDue = false
                    case UInt8(ascii: "n"):
                        guard literal("null") else { return false }
                        valueDue = false
                    default:
                        guard number() else { return false }
                        valueDue = false
                    }
                    continue
                }
                guard let isObject = open.last else { return index == bytes.count }
                guard index < bytes.count else { return false }
                switch bytes[index] {
                case UInt8(ascii: ","):
                    index += 1
                    valueDue = true
                    if isObject {
                        skipWhitespace()
                        guard member() else { return false }
                    }
                case UInt8(ascii: "}") where isObject, UInt8(ascii: "]") where !isObject:
                    index += 1
                    open.removeLast()
                default:
                    return false
                }
            }
        }

        /// An object member's name and its `:`; its value is due next.
        private mutating func member() -> Bool {
            guard peek(UInt8(ascii: "\"")), string() != nil else { return false }
            skipWhitespace()
            guard peek(UInt8(ascii: ":")) else { return false }
            index += 1
            return true
        }

        /// A string value, and its replacement when it is a link to the API.
        private mutating func stringValue() -> Bool {
            let start = index
            guard let escaped = string() else { return false }
            let content = UnsafeBufferPointer(rebasing: bytes[(start + 1)..<(index - 1)])
            if !escaped {
                if let link = location.rewrite(content) {
                    replacements.append(Replacement(range: start..<index, bytes: ProxyJSONLinks.literal(link, style: Style())))
                }
            } else if location.mightStartEscaped(content), let (decoded, style) = ProxyJSONLinks.decode(content),
                let link = decoded.withUnsafeBufferPointer({ location.rewrite($0) })
            {
                replacements.append(Replacement(range: start..<index, bytes: ProxyJSONLinks.literal(link, style: style)))
            }
            return true
        }

        /// Past a string at `index` (its opening quote): nil when it is not a valid string
        /// literal, else whether it holds escapes.
        private mutating func string() -> Bool? {
            index += 1
            var escaped = false
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    return escaped
                case UInt8(ascii: "\\"):
                    escaped = true
                    guard index + 1 < bytes.count else { return nil }
                    switch bytes[index + 1] {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"),
                        UInt8(ascii: "r"), UInt8(ascii: "t"):
                        index += 2
                    case UInt8(ascii: "u"):
                        guard index + 5 < bytes.count, (2...5).allSatisfy({ ProxyJSONLinks.hexValue(bytes[index + $0]) != nil }) else {
                            return nil
                        }
                        index += 6
                    default:
                        return nil
                    }
                case 0..<0x20:
                    return nil
                default:
                    index += 1
                }
            }
            return nil
        }

        private mutating func number() -> Bool {
            let start = index
            if peek(UInt8(ascii: "-")) { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { return false }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else {
                skipDigits()
            }
            if peek(UInt8(ascii: ".")) {
                index += 1
                guard index < bytes.count, isDigit(bytes[index]) else { return false }
                skipDigits()
            }
            if index < bytes.count, bytes[index] | 0x20 == UInt8(ascii: "e") {
                index += 1
                if peek(UInt8(ascii: "+")) || peek(UInt8(ascii: "-")) { index += 1 }
                guard index < bytes.count, isDigit(bytes[index]) else { return false }
                skipDigits()
            }
            return index > start
        }

        private mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { return false }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
            index += count
            return true
        }

        private func peek(_ byte: UInt8) -> Bool { index < bytes.count && bytes[index] == byte }

        private func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }

        private mutating func skipDigits() {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }

        private mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }
    }

    /// How a string was escaped, to write its replacement the same way.
    struct Style {
        /// It wrote `/` as `\/`.
        var slash = false
        /// The ASCII characters it wrote as `\u00XX` (a bit per character).
        var ascii: (low: UInt64, high: UInt64) = (0, 0)
        /// It wrote a non-ASCII character as `\uXXXX`.
        var nonASCII = false
        /// Its `\u` escapes used lower-case hex digits.
        var lowercaseHex = false

        func writesEscaped(_ byte: UInt8) -> Bool {
            byte < 64 ? ascii.low & (1 << UInt64(byte)) != 0 : ascii.high & (1 << UInt64(byte - 64)) != 0
        }

        mutating func noteEscaped(_ byte: UInt8) {
            if byte < 64 { ascii.low |= 1 << UInt64(byte) } else { ascii.high |= 1 << UInt64(byte - 64) }
        }
    }

    /// A string literal's content (between its quotes, already checked) as UTF-8, and how it was
    /// escaped; nil when it holds a lone surrogate (no text, so no link).
    static func decode(_ content: UnsafeBufferPointer<UInt8>) -> ([UInt8], Style)? {
        var decoded: [UInt8] = []
        decoded.reserveCapacity(content.count)
        var style = Style()
        var index = 0
        while index < content.count {
            let byte = content[index]
            guard byte == UInt8(ascii: "\\") else {
                decoded.append(byte)
                index += 1
                continue
            }
            let kind = content[index + 1]
            index += 2
            switch kind {
            case UInt8(ascii: "b"): decoded.append(0x08)
            case UInt8(ascii: "f"): decoded.append(0x0C)
            case UInt8(ascii: "n"): decoded.append(0x0A)
            case UInt8(ascii: "r"): decoded.append(0x0D)
            case UInt8(ascii: "t"): decoded.append(0x09)
            case UInt8(ascii: "u"):
                var lowercase = false
                guard let high = unit(content, at: index, lowercase: &lowercase) else { return nil }
                index += 4
                var scalar = UInt32(high)
                if (0xD800...0xDBFF).contains(high) {
                    guard index + 6 <= content.count, content[index] == UInt8(ascii: "\\"), content[index + 1] == UInt8(ascii: "u"),
                        let low = unit(content, at: index + 2, lowercase: &lowercase), (0xDC00...0xDFFF).contains(low)
                    else { return nil }
                    index += 6
                    scalar = 0x10000 + ((UInt32(high) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(high) {
                    return nil
                }
                guard let character = Unicode.Scalar(scalar) else { return nil }
                if lowercase { style.lowercaseHex = true }
                if scalar < 0x80 { style.noteEscaped(UInt8(scalar)) } else { style.nonASCII = true }
                decoded.append(contentsOf: UTF8.encode(character)!)
            default:
                // `"`, `\` and `/` stand for themselves.
                if kind == UInt8(ascii: "/") { style.slash = true }
                decoded.append(kind)
            }
        }
        return (decoded, style)
    }

    /// `text` as a string literal, quotes included, escaped as `style` says.
    static func literal(_ text: [UInt8], style: Style) -> [UInt8] {
        var output: [UInt8] = [UInt8(ascii: "\"")]
        output.reserveCapacity(text.count + 8)
        func escape(_ unit: UInt16) {
            let high = Hex.digits(UInt8(unit >> 8), uppercase: !style.lowercaseHex)
            let low = Hex.digits(UInt8(unit & 0xFF), uppercase: !style.lowercaseHex)
            output += [UInt8(ascii: "\\"), UInt8(ascii: "u"), high.high, high.low, low.high, low.low]
        }
        func append(_ byte: UInt8) {
            if byte < 0x80, style.writesEscaped(byte) {
                escape(UInt16(byte))
                return
            }
            switch byte {
            case UInt8(ascii: "\""): output += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): output += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case UInt8(ascii: "/") where style.slash: output += [UInt8(ascii: "\\"), UInt8(ascii: "/")]
            case 0x08: output += [UInt8(ascii: "\\"), UInt8(ascii: "b")]
            case 0x0C: output += [UInt8(ascii: "\\"), UInt8(ascii: "f")]
            case 0x0A: output += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0D: output += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: output += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0..<0x20: escape(UInt16(byte))
            default: output.append(byte)
            }
        }
        if style.nonASCII, text.contains(where: { $0 >= 0x80 }) {
            // Non-ASCII text is escaped as the original escaped it (UTF-16 units, RFC 8259 §7).
            for scalar in String(decoding: text, as: UTF8.self).unicodeScalars {
                if scalar.value < 0x80 {
                    append(UInt8(scalar.value))
                } else {
                    for unit in UTF16.encode(scalar)! { escape(unit) }
                }
            }
        } else {
            for byte in text { append(byte) }
        }
        output.append(UInt8(ascii: "\""))
        return output
    }

    /// Four hex digits at `index` as a UTF-16 unit.
    private static func unit(_ content: UnsafeBufferPointer<UInt8>, at index: Int, lowercase: inout Bool) -> UInt16? {
        guard index + 4 <= content.count else { return nil }
        var value: UInt16 = 0
        for offset in 0..<4 {
            let byte = content[index + offset]
            guard let digit = hexValue(byte) else { return nil }
            if (0x61...0x66).contains(byte) { lowercase = true }
            value = value << 4 | UInt16(digit)
        }
        return value
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }
}
