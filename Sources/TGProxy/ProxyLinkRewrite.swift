public import CoreMetrics
import HTTPTypes
import TGHTTPClient
import TGHTTPServer

/// `rewrite_links` of one API (docs/proxy.md, "Next links and other absolute URLs"): which of its
/// answers get their links to the API made TokenGate's (``ProxyLocation``'s rule), and how. Made
/// once per API that has it on; an API with it off has none, and its calls do nothing more.
///
/// - `Link` fields: the target of each link-value (`<…>`) is rewritten; parameters (`rel`,
///   `anchor`, …) stay as they are. A field that does not parse as link-values stays whole.
/// - Bodies: only JSON (`application/json` or `application/…+json`, no charset or `utf-8`), not
///   content-encoded (`Content-Encoding` none or `identity`), not `Cache-Control: no-transform`,
///   without a digest of the content (`Content-Digest`, `Repr-Digest`, `Digest`, `Content-MD5`,
///   which a new body would contradict), not a 206, and at most ``maxBodyBytes`` long: read whole,
///   rewritten by ``ProxyJSONLinks``, sent with its new `Content-Length`. A larger body streams as
///   it is: when its `Content-Length` says so at once, without reading any of it; when it has none,
///   after the first ``maxBodyBytes`` read, which go out first, unchanged.
public final class ProxyLinkRewrite: Sendable {
    let location: ProxyLocation
    /// `rewrite_max_body_bytes`.
    let maxBodyBytes: Int
    let metrics: Metrics?

    init(location: ProxyLocation, maxBodyBytes: Int, metrics: Metrics?) {
        self.location = location
        self.maxBodyBytes = maxBodyBytes
        self.metrics = metrics
    }

    /// What became of a JSON body (`tokengate_proxy_link_rewrites_total{outcome}`).
    enum Outcome: Int, CaseIterable {
        /// At least one link was rewritten.
        case rewritten
        /// Valid JSON without a link to the API.
        case noLinks
        /// Longer than `rewrite_max_body_bytes`: passed unchanged.
        case tooLarge
        /// Content-encoded (gzip, br, …): passed unchanged.
        case compressed
        /// `Cache-Control: no-transform`, or a digest of the content: passed unchanged.
        case noTransform
        /// Not valid JSON: passed unchanged.
        case invalid

        var label: String {
            switch self {
            case .rewritten: "rewritten"
            case .noLinks: "no_links"
            case .tooLarge: "too_large"
            case .compressed: "compressed"
            case .noTransform: "no_transform"
            case .invalid: "invalid"
            }
        }
    }

    /// One counter per outcome, shared by the APIs (counting is an atomic add).
    public struct Metrics: Sendable {
        let counters: [CoreMetrics.Counter]

        public init(factory: any MetricsFactory) {
            counters = Outcome.allCases.map {
                CoreMetrics.Counter(label: "tokengate_proxy_link_rewrites_total", dimensions: [("outcome", $0.label)], factory: factory)
            }
        }

        func count(_ outcome: Outcome) { counters[outcome.rawValue].increment() }
    }

    func count(_ outcome: Outcome) { metrics?.count(outcome) }

    /// What to do with an answer's body.
    enum Plan: Equatable {
        /// Read it (up to the limit), then rewrite it.
        case read
        /// Pass it as it is: why, or nil when it is no JSON body (not counted).
        case pass(Outcome?)
    }

    /// The plan for an answer of `status` whose fields `forEachField` gives, one `(name, value)`
    /// at a time; `contentLength` is its announced length.
    func plan(
        status: Int,
        contentLength: Int?,
        _ forEachField: ((_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) -> Void) -> Void
    ) -> Plan {
        // No body (1xx, 204, 304), or a part of one (206).
        guard status >= 200, status != 204, status != 304, status != 206 else { return .pass(nil) }
        var contentTypes = 0
        var json = false
        var encoded = false
        var untouchable = false
        forEachField { name, value in
            switch name.count {
            case 12 where RawHeaderFields.equalsIgnoringCase(name, "content-type"):
                contentTypes += 1
                json = Self.isJSON(value)
            case 16 where RawHeaderFields.equalsIgnoringCase(name, "content-encoding"):
                let coding = Self.trimmed(value)
                if !coding.isEmpty, !RawHeaderFields.equalsIgnoringCase(coding, "identity") { encoded = true }
            case 13 where RawHeaderFields.equalsIgnoringCase(name, "cache-control"):
                RawHead.forEachListItem(value) { if RawHeaderFields.equalsIgnoringCase($0, "no-transform") { untouchable = true } }
            case 6 where RawHeaderFields.equalsIgnoringCase(name, "digest"), 11 where RawHeaderFields.equalsIgnoringCase(name, "content-md5"),
                11 where RawHeaderFields.equalsIgnoringCase(name, "repr-digest"), 14 where RawHeaderFields.equalsIgnoringCase(name, "content-digest"):
                untouchable = true
            default:
                break
            }
        }
        guard contentTypes == 1, json, contentLength != 0 else { return .pass(nil) }
        if encoded { return .pass(.compressed) }
        if untouchable { return .pass(.noTransform) }
        if let contentLength, contentLength > maxBodyBytes { return .pass(.tooLarge) }
        return .read
    }

    /// A whole body of an answer planned ``Plan/read``, with its links rewritten (itself when it
    /// has none or is not valid JSON). Counted.
    func rewrite(_ body: [UInt8]) -> [UInt8] {
        switch ProxyJSONLinks.rewrite(body, with: location) {
        case .rewritten(let rewritten):
            count(.rewritten)
            return rewritten
        case .unchanged:
            count(.noLinks)
            return body
        case .invalid:
            count(.invalid)
            return body
        }
    }

    /// A `Link` field's value (RFC 8288 §3) with the targets that name the API rewritten; nil when
    /// none does, or when the value does not parse as link-values.
    func rewriteLinkField(_ value: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var output: [UInt8] = []
        output.reserveCapacity(value.count + 64)
        var changed = false
        var index = 0
        while index < value.count {
            // Between link-values: spaces, tabs and commas (empty list elements are allowed).
            while index < value.count, value[index] == 0x20 || value[index] == 0x09 || value[index] == UInt8(ascii: ",") {
                output.append(value[index])
                index += 1
            }
            guard index < value.count else { break }
            guard value[index] == UInt8(ascii: "<"), let close = value[(index + 1)...].firstIndex(of: UInt8(ascii: ">")) else {
                return nil
            }
            let target = UnsafeBufferPointer(rebasing: value[(index + 1)..<close])
            output.append(UInt8(ascii: "<"))
            if let rewritten = location.rewrite(target) {
                output += rewritten
                changed = true
            } else {
                output += target
            }
            output.append(UInt8(ascii: ">"))
            index = close + 1
            // Its parameters, up to a comma outside a quoted string.
            var quoted = false
            while index < value.count {
                let byte = value[index]
                if quoted {
                    if byte == UInt8(ascii: "\\"), index + 1 < value.count {
                        output += [byte, value[index + 1]]
                        index += 2
                        continue
                    }
                    if byte == UInt8(ascii: "\"") { quoted = false }
                } else if byte == UInt8(ascii: "\"") {
                    quoted = true
                } else if byte == UInt8(ascii: ",") {
                    break
                }
                output.append(byte)
                index += 1
            }
            guard !quoted else { return nil }
        }
        return changed ? output : nil
    }

    /// A JSON media type (RFC 8259 §11, RFC 6839 §3.1) in UTF-8: `application/json` or
    /// `application/<anything>+json`, with any parameters but a charset other than UTF-8.
    static func isJSON(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        let parts = String(decoding: value, as: UTF8.self).lowercased().split(separator: ";", omittingEmptySubsequences: false)
        let media = parts[0].trimmingWhitespace()
        guard media == "application/json" || (media.hasPrefix("application/") && media.hasSuffix("+json")) else { return false }
        for parameter in parts.dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, pair[0].trimmingWhitespace() == "charset" else { continue }
            var charset = pair[1].trimmingWhitespace()
            if charset.count >= 2, charset.hasPrefix("\""), charset.hasSuffix("\"") { charset = charset.dropFirst().dropLast() }
            if charset != "utf-8" { return false }
        }
        return true
    }

    private static func trimmed(_ value: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        var start = 0
        var end = value.count
        while start < end, value[start] == 0x20 || value[start] == 0x09 { start += 1 }
        while end > start, value[end - 1] == 0x20 || value[end - 1] == 0x09 { end -= 1 }
        return UnsafeBufferPointer(rebasing: value[start..<end])
    }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> Substring {
        var text = self
        while text.first == " " || text.first == "\t" { text = text.dropFirst() }
        while text.last == " " || text.last == "\t" { text = text.dropLast() }
        return text
    }
}
