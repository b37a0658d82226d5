/// Errors of the PostgreSQL wrapper.
///
/// `description` is generic: it never contains the server's message, the SQL or a bound value, so it
/// is safe to show or log anywhere. The server's message is only in `debugDescription`.
public struct PostgresError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    enum Code: Sendable, Equatable {
        case connectionFailed
        case connectionClosed
        case server
        case poolTimeout
        case poolClosed
        case decoding
        case cancelled
        case invalidArgument
    }

    let code: Code
    /// The SQLSTATE the server reported, for `server` errors (and connection errors that carry one).
    public let sqlState: SQLState?
    /// The server's or libpq's message. Can contain data: never show it to a client.
    let detail: String?

    init(_ code: Code, sqlState: SQLState? = nil, detail: String? = nil) {
        self.code = code
        self.sqlState = sqlState
        self.detail = detail
    }

    /// Could not connect (refused, authentication, unknown database, …).
    public var isConnectionFailed: Bool { code == .connectionFailed }
    /// The connection broke while in use; the work may or may not have been done.
    public var isConnectionClosed: Bool { code == .connectionClosed }
    /// No connection was free before the acquire timeout.
    public var isPoolTimeout: Bool { code == .poolTimeout }
    /// The pool was shut down.
    public var isPoolClosed: Bool { code == .poolClosed }
    /// A value could not be decoded as the requested type.
    public var isDecoding: Bool { code == .decoding }
    /// The query was cancelled (task cancellation or statement timeout).
    public var isCancelled: Bool { code == .cancelled || sqlState == .queryCanceled }
    /// The server refused the statement; see ``sqlState``.
    public var isServerError: Bool { code == .server }

    /// True when the database is unreachable rather than refusing the statement: callers may retry
    /// later and must not treat it as "not found".
    public var isUnavailable: Bool { code == .connectionFailed || code == .connectionClosed || code == .poolTimeout }

    public var description: String {
        switch code {
        case .connectionFailed: "PostgreSQL: could not connect"
        case .connectionClosed: "PostgreSQL: connection closed"
        case .server: "PostgreSQL: server error \(sqlState?.rawValue ?? "?")"
        case .poolTimeout: "PostgreSQL: no connection available in time"
        case .poolClosed: "PostgreSQL: client shut down"
        case .decoding: "PostgreSQL: could not decode a value"
        case .cancelled: "PostgreSQL: query cancelled"
        case .invalidArgument: "PostgreSQL: invalid argument"
        }
    }

    public var debugDescription: String {
        guard let detail else { return description }
        return "\(description): \(detail)"
    }
}

/// A SQLSTATE code, with the ones TokenGate reacts to as named constants (grouped by class).
public struct SQLState: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// The two-character class (`23` integrity constraint violation, `40` transaction rollback, …).
    public var errorClass: Substring { rawValue.prefix(2) }

    // Class 08 — connection exception
    public static let connectionException = SQLState(rawValue: "08000")
    public static let connectionFailure = SQLState(rawValue: "08006")
    // Class 23 — integrity constraint violation
    public static let notNullViolation = SQLState(rawValue: "23502")
    public static let foreignKeyViolation = SQLState(rawValue: "23503")
    public static let uniqueViolation = SQLState(rawValue: "23505")
    public static let checkViolation = SQLState(rawValue: "23514")
    // Class 25 — invalid transaction state
    /// A write refused by a server that does not accept writes: a primary demoted to a replica,
    /// a hot standby, or `default_transaction_read_only` turned on.
    public static let readOnlySQLTransaction = SQLState(rawValue: "25006")
    // Class 40 — transaction rollback
    public static let serializationFailure = SQLState(rawValue: "40001")
    public static let deadlockDetected = SQLState(rawValue: "40P01")
    // Class 42 — syntax error or access rule violation
    public static let syntaxError = SQLState(rawValue: "42601")
    public static let undefinedTable = SQLState(rawValue: "42P01")
    public static let undefinedColumn = SQLState(rawValue: "42703")
    // Class 55 — object not in prerequisite state
    public static let lockNotAvailable = SQLState(rawValue: "55P03")
    // Class 57 — operator intervention
    public static let queryCanceled = SQLState(rawValue: "57014")
    public static let adminShutdown = SQLState(rawValue: "57P01")
    public static let crashShutdown = SQLState(rawValue: "57P02")
    public static let cannotConnectNow = SQLState(rawValue: "57P03")
}
