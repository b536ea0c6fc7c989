public import Foundation
import Vocabulary

/// A console session of the support desk, kept in the ledger: found by the SHA-256 of the random token its cookie
/// carries, so neither the ledger nor its backups hold what a browser presents.
public struct DeskSession: Sendable, Equatable {
    /// Hex SHA-256 of the cookie's token.
    public var id: String
    public var subject: String
    public var name: String
    /// The roles granted at sign-in (`viewer`, `agent`, `lead`).
    public var roles: [String]
    public var createdAt: Date
    /// The last request it made (its idle time counts from there; updated at most once a minute).
    public var seenAt: Date
    public var expiresAt: Date
    public var endedAt: Date?
    /// Who ended it: its agent's subject at sign-out, a lead's, or `expired`.
    public var endedBy: String?

    public init(
        id: String, subject: String, name: String, roles: [String], createdAt: Date, seenAt: Date, expiresAt: Date,
        endedAt: Date? = nil, endedBy: String? = nil
    ) {
        self.id = id
        self.subject = subject
        self.name = name
        self.roles = roles
        self.createdAt = createdAt
        self.seenAt = seenAt
        self.expiresAt = expiresAt
        self.endedAt = endedAt
        self.endedBy = endedBy
    }
}
