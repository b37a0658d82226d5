import Foundation
import TGPostgres
import TGTesting
import Testing

@Suite struct QueryTests {
    @Test func bindsEveryTypeAndReadsItBackIncludingNulls() async throws {
        try await TestDatabase.withFreshDatabase { client, _ async throws in
            let id = UUID()
            let when = Date(timeIntervalSince1970: 1_795_000_000.123456)
            let bytes = PostgresBytes([0, 1, 0xFE, 0xFF, 0x27])
            let scopes = PostgresTextArray(["openid", "User.Read", "a \"quoted\" \\ one", ""])
            let rows = try await client.query(
                """
                SELECT \("it's ☃")::text AS text, \(Int64.max)::int8 AS big, \(Int32(-7))::int4 AS small, \(true)::bool AS flag,
                       \(2.5)::float8 AS ratio, \(id)::uuid AS id, \(when)::timestamptz AS at, \(bytes)::bytea AS raw,
                       \(scopes)::text[] AS scopes, \(String?.none)::text AS nothing
                """
            )
            let row = try #require(rows.first)
            #expect(try row.decode(String.self, "text") == "it's ☃")
            #expect(try row.decode(Int64.self, "big") == Int64.max)
            #expect(try row.decode(Int32.self, "small") == -7)
            #expect(try row.decode(Bool.self, "flag"))
            #expect(try row.decode(Double.self, "ratio") == 2.5)
            #expect(try row.decode(UUID.self, "id") == id)
            let readBack = try row.decode(Date.self, "at")
            #expect(abs(readBack.timeIntervalSince(when)) < 0.000_001)
            #expect(try row.decode(PostgresBytes.self, "raw") == bytes)
            #expect(try row.decode(PostgresTextArray.self, "scopes") == scopes)
            #expect(try row.decode(String?.self, "nothing") == nil)
            #expect(throws: PostgresError.self) { try row.decode(String.self, "nothing") }
            #expect(throws: PostgresError.self) { try row.decode(Int.self, "text") }
        }
    }

    @Test func splicesAFragmentWithItsParametersRenumbered() async throws {
        try await TestDatabase.withFreshDatabase { client, _ async throws in
            let condition: PostgresQuery = "SELECT n FROM generate_series(1, 10) n WHERE n > \(7) OR n = \(2)"
            let query: PostgresQuery = "SELECT count(*) AS c, \("$1-text") AS label FROM (\(fragment: condition)) AS s WHERE n <> \(9)"
            #expect(query.sql.contains("$3") && query.sql.contains("$4") && query.binds.count == 4)
            let row = try #require(try await client.query(query).first)
            #expect(try row.decode(Int.self, "c") == 3)  // 2, 8 and 10; 9 is excluded by the outer bind
            #expect(try row.decode(String.self, "label") == "$1-text")
        }
    }

    @Test func keepsInjectionAttemptsAsData() async throws {
        try await TestDatabase.withFreshDatabase { client, _ async throws in
            try await client.query("CREATE TABLE notes (body text NOT NULL)")
            let hostile = "x'); DROP TABLE notes; --"
            try await client.query("INSERT INTO notes (body) VALUES (\(hostile))")
            let rows = try await client.query("SELECT body FROM notes WHERE body = \(hostile)")
            #expect(rows.count == 1)
            #expect(try rows.first?.decode(String.self, "body") == hostile)
        }
    }

    @Test func reportsSQLStateWithoutLeakingTheMessageOrValues() async throws {
        try await TestDatabase.withFreshDatabase { client, _ async throws in
            try await client.query("CREATE TABLE users (email text PRIMARY KEY)")
            try await client.query("INSERT INTO users VALUES (\("secret@example.com"))")
            let duplicate = await #expect(throws: PostgresError.self) {
                try await client.query("INSERT INTO users VALUES (\("secret@example.com"))")
            }
            #expect(duplicate?.sqlState == .uniqueViolation)
            #expect(duplicate?.isServerError == true)
            #expect(!(duplicate?.description.contains("secret") ?? true))
            #expect(duplicate?.debugDescription.contains("duplicate key") == true)
            let syntax = await #expect(throws: PostgresError.self) { try await client.query("SELEKT 1") }
            #expect(syntax?.sqlState == .syntaxError)
            #expect(syntax?.sqlState?.errorClass == "42")
        }
    }

    @Test func reportsAffectedRows() async throws {
        try await TestDatabase.withFreshDatabase { client, _ async throws in
            try await client.query("CREATE TABLE t (n int)")
            let inserted = try await client.query("INSERT INTO t SELECT generate_series(1, 5)")
            #expect(inserted.affectedRows == 5)
            let deleted = try await client.query("DELETE FROM t WHERE n > \(3)")
            #expect(deleted.affectedRows == 2)
        }
    }
}
