public import Foundation

enum LeaseQueries {
    static func acquire(_ name: String, holder: String, until: Date, now: Date, in session: any SQLSession) throws
        -> String?
    {
        let spelling = session.spelling
        let leases = spelling.table("leases")
        return try session.first(
            """
            INSERT INTO \(leases) AS l (name, holder, expires_at) VALUES (?1, ?2, \(spelling.time(3)))
                ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
                    WHERE l.expires_at <= \(spelling.time(4)) OR l.holder = excluded.holder
                RETURNING state
            """, [.text(name), .text(holder), .time(until), .time(now)]
        )?.text(0)
    }

    static func recordState(_ name: String, holder: String, state: String, in session: any SQLSession) throws {
        try session.rows(
            "UPDATE \(session.spelling.table("leases")) SET state = ?3 WHERE name = ?1 AND holder = ?2",
            [.text(name), .text(holder), .text(state)])
    }

    /// The newest of Apple's notifications handled: not what the worker made itself (a subscription's status
    /// asked of Apple), which would keep saying Apple was heard while its deliveries go elsewhere. By the index of
    /// `handled_at`, read from its newest end.
    static func newestNotification(in session: any SQLSession) throws -> Date? {
        let spelling = session.spelling
        return try session.first(
            """
            SELECT \(spelling.readTime("handled_at")) FROM \(spelling.table("notifications")) WHERE source IS NULL
                ORDER BY handled_at DESC LIMIT 1
            """, []
        )?.time(0)
    }
}

extension LedgerEngine: LeaseStore {
    public func acquireLease(_ name: String, holder: String, until: Date, now: Date) async throws -> String? {
        try await dialect.write { try LeaseQueries.acquire(name, holder: holder, until: until, now: now, in: $0) }
    }

    public func recordLeaseState(_ name: String, holder: String, state: String) async throws {
        try await dialect.write { try LeaseQueries.recordState(name, holder: holder, state: state, in: $0) }
    }

    public func newestNotificationHandled() async throws -> Date? {
        try await dialect.read { try LeaseQueries.newestNotification(in: $0) }
    }
}
