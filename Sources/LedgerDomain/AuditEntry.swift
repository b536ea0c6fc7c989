public import Foundation
import Vocabulary

/// One line of the desk's audit.
public struct AuditEntry: Sendable, Equatable, Codable {
    public var id: Int64
    public var at: Date
    /// The app's name (`default`, an `apps.NAME`).
    public var app: String
    /// Who: the token's subject (unique at the provider), and the name it gave.
    public var agent: String
    public var agentName: String
    /// The role the request used (viewer, agent, lead).
    public var role: String
    /// `lookup`, `history`, `credit`, `approve`, `reject`.
    public var action: String
    /// `answered`, `not_found`, `credited`, `held`, `refused`, `approved`, `rejected`, `failed`.
    public var outcome: String
    public var ticket: String
    /// The player the request names (a credit's, a lookup by player's), if any.
    public var player: String?
    /// What was asked and what was answered or recorded, as JSON objects.
    public var request: String
    public var answer: String

    public init(
        id: Int64 = 0, at: Date, app: String, agent: String, agentName: String, role: String, action: String,
        outcome: String, ticket: String, player: String?, request: String, answer: String
    ) {
        self.id = id
        self.at = at
        self.app = app
        self.agent = agent
        self.agentName = agentName
        self.role = role
        self.action = action
        self.outcome = outcome
        self.ticket = ticket
        self.player = player
        self.request = request
        self.answer = answer
    }
}

public struct AuditFilter: Sendable, Equatable {
    public var since: Date?
    public var agent: String?
    public var player: String?
    /// One action's lines (`extend_all`: the mass extensions started); read by scanning back from the newest.
    public var action: String?
    public var limit: Int

    public init(
        since: Date? = nil, agent: String? = nil, player: String? = nil, action: String? = nil, limit: Int = 100
    ) {
        self.since = since
        self.agent = agent
        self.player = player
        self.action = action
        self.limit = limit
    }
}
