public import Foundation
public import Vocabulary

/// The consumption flow's view: the grant an answer is about, and the requests still open.
public protocol ConsumptionRequestStore: Sendable {
    /// The grant of a transaction (by its id), in `app` when given, else in any app; Production first.
    func grant(transactionID: String, app: AppScope?) async throws -> GrantRecord?

    /// Marks the consumption request of a transaction answered (sent, or refused for good).
    func answerConsumptionRequest(app: AppScope, environment: AppleEnvironment, transactionID: String) async throws

    /// When the oldest consumption request not yet answered and not yet past its deadline was made, per app (an
    /// app without one is absent).
    func oldestOpenConsumptionRequests() async throws -> [AppScope: Date]

    /// How many requests, per app, passed their deadline between `since` and `now` still open: no answer taken by
    /// Apple (one received from a grant service or a policy too late, failing until then, or that could not be sent
    /// leaves it open), no 4xx from Apple, no refusal of the player's consent. Apple decided them without the game's data. An app
    /// without one is absent.
    func missedConsumptionRequests(since: Date, now: Date) async throws -> [AppScope: Int]

    /// The requests of `app` no one answered (no answer taken by Apple, none received from a grant service) whose
    /// deadline comes before `dueBy` (and is not past at `now`), soonest first, at most `limit`: what an app's
    /// policy answers.
    func dueConsumptionRequests(app: AppScope, dueBy: Date, now: Date, limit: Int) async throws
        -> [OpenConsumptionRequest]

    /// Remembers that a grant service's answer to the request of a transaction reached the worker (before Apple
    /// took it): from then on the request is answered for an app's policy, whatever becomes of that answer.
    func consumptionAnswerReceived(app: AppScope, environment: AppleEnvironment, transactionID: String) async throws

    /// Whether the request of a transaction was answered: Apple took an answer, or a grant service's answer was
    /// received (sent, still being sent, or refused).
    func consumptionRequestAnswered(app: AppScope, environment: AppleEnvironment, transactionID: String)
        async throws -> Bool
}

/// A refund (consumption) request no grant service answered yet.
public struct OpenConsumptionRequest: Sendable, Equatable {
    public var environment: AppleEnvironment
    public var transactionID: String
    public var respondBy: Date

    public init(environment: AppleEnvironment, transactionID: String, respondBy: Date) {
        self.environment = environment
        self.transactionID = transactionID
        self.respondBy = respondBy
    }
}
