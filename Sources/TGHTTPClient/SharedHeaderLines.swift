import CCurl

/// Header lines built once and sent by many requests, for as long as any of them needs them:
/// libcurl's list nodes and their text in one block that a request's own lines link to. A
/// proxied call in flight then holds a reference instead of a copy of, say, a 2 KB access token
/// (thousands of calls at once in a burst).
public final class SharedHeaderLines: @unchecked Sendable {
    // Invariant: the block is written in `init` only and freed in `deinit`, after the last
    // transfer that links to it let it go; libcurl and transfers on any loop only read it.
    let block: UnsafeMutableRawPointer?
    let first: UnsafeMutablePointer<curl_slist>?

    public init(_ lines: HeaderLines) {
        var memory = HeaderBlockMemory()
        let made = Transfer.headerBlock(lines, then: nil, in: &memory)
        block = made?.block
        first = made?.first
    }

    deinit { block?.deallocate() }

    /// No line: nothing to send.
    public var isEmpty: Bool { first == nil }

    /// The lines as libcurl sends them, in order.
    var lines: [String] {
        var result: [String] = []
        var node = first
        while let current = node {
            result.append(String(cString: current.pointee.data))
            node = current.pointee.next
        }
        return result
    }
}
