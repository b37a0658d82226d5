import TGPostgres

/// A storage failure as the layers above `TGStore` see it: what an answer needs to know, never
/// SQL, a value or the driver's error type. `TGStore` turns the driver's errors into it where
/// it calls the driver (statements, transactions, locks, the listener, reading a row), through
/// ``init(_:)``, so nothing above it meets a `PostgresError`.
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The database cannot be reached now (no connection, one lost, none free in time).
        case unavailable
        /// The statement was cancelled (the request's deadline passed, or a statement timeout).
        case cancelled
        /// A constraint refused the change (unique, foreign key, not null, check).
        case conflict
        /// Anything else: a statement the server refused, a value that could not be read, a
        /// client shut down.
        case failed
    }

    public let kind: Kind
    /// What the database answered (its SQLSTATE), never a query or a value.
    public let description: String

    public init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }

    /// Whether trying again shortly may work: the database was unreachable, or the statement
    /// was cancelled (a 503 with `Retry-After` at the HTTP edge).
    public var isTransient: Bool { kind == .unavailable || kind == .cancelled }

    /// A statement that must return a row returned none (a broken invariant of the schema).
    static func noRowReturned(_ table: String) -> StoreError { StoreError(.failed, "no row returned from \(table)") }

    /// The driver's error as a storage failure; any other error is not the store's.
    init(_ error: PostgresError) {
        let kind: Kind =
            if error.isUnavailable {
                .unavailable
            } else if error.isCancelled {
                .cancelled
            } else if error.sqlState?.errorClass == "23" {
                .conflict
            } else {
                .failed
            }
        self.init(kind, "\(error.description) (\(error.sqlState?.rawValue ?? "no SQLSTATE"))")
    }

    /// Runs `body`, its driver errors as storage failures; every other error passes unchanged.
    static func mapping<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as PostgresError {
            throw StoreError(error)
        }
    }

    /// ``mapping(_:)`` for synchronous work.
    static func mappingNow<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as PostgresError {
            throw StoreError(error)
        }
    }
}

extension PostgresRow {
    /// Column `name` as `type` (``PostgresRow/decode(_:_:)``), a failure as a ``StoreError``.
    func value<T: PostgresDecodable>(_ type: T.Type, _ name: String) throws -> T {
        try StoreError.mappingNow { try decode(type, name) }
    }

    /// Column `name` as `type`, nil for NULL.
    func value<T: PostgresDecodable>(_ type: T?.Type, _ name: String) throws -> T? {
        try StoreError.mappingNow { try decode(type, name) }
    }

    /// Column `index` as `type`.
    func value<T: PostgresDecodable>(_ type: T.Type, at index: Int) throws -> T {
        try StoreError.mappingNow { try decode(type, at: index) }
    }
}
