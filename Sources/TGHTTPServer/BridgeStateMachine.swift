/// The hand-off between a libmicrohttpd thread and the async handler of one request, as a pure
/// value type so every interleaving can be tested without threads.
///
/// The MHD thread starts the handler (whose first part may run inline and finish at once), then
/// calls ``startReturned()``: either the response is already there and is queued without ever
/// suspending the connection, or the connection is suspended. Whoever finishes the handler calls
/// ``complete(_:)``; if the connection was suspended it must be resumed, after which MHD calls the
/// access handler again and ``takeResponse()`` hands over the response. The first completion wins
/// (a deadline answer and the late real answer cannot both be sent).
///
/// The owner serialises every call with a lock, and performs the suspend and resume it is told to
/// while still holding that lock, so a resume can never precede its suspend.
struct BridgeStateMachine<Response> {
    enum State {
        case running
        case suspended
        case completed(Response)
        case delivered
    }

    enum StartReturnedAction {
        /// The handler finished inline: queue this response now, no suspension.
        case queue(Response)
        /// Suspend the connection; a later ``complete(_:)`` will ask for a resume.
        case suspend
    }

    enum CompleteAction: Equatable {
        /// Nothing to do: the MHD thread will pick the response up, or it was already answered.
        case none
        /// Resume the (suspended) connection.
        case resume
    }

    private(set) var state: State = .running

    init() {}

    /// The state, moved out (the response it holds is not copied), `replacement` left in its place.
    private mutating func take(leaving replacement: State) -> State {
        var taken = replacement
        swap(&taken, &state)
        return taken
    }

    mutating func startReturned() -> StartReturnedAction {
        switch take(leaving: .suspended) {
        case .running:
            return .suspend
        case .completed(let response):
            state = .delivered
            return .queue(response)
        case .suspended, .delivered:
            preconditionFailure("startReturned called twice")
        }
    }

    mutating func complete(_ response: consuming Response) -> CompleteAction {
        switch state {
        case .running:
            state = .completed(response)
            return .none
        case .suspended:
            state = .completed(response)
            return .resume
        case .completed, .delivered:
            return .none
        }
    }

    /// After a resume: the response to queue, or nil if there is none (a spurious call).
    mutating func takeResponse() -> Response? {
        guard case .completed = state, case .completed(let response) = take(leaving: .delivered) else { return nil }
        return response
    }

    var isFinished: Bool {
        switch state {
        case .completed, .delivered: true
        case .running, .suspended: false
        }
    }
}
