package import Messaging
import Synchronization

/// The consumption answers of one transaction in the order the grant service produced them: Apple must get
/// the newest last. A newer answer supersedes the older ones (they stop before their next call to Apple), and
/// waits for an older answer's call already in flight to end before it makes its own, so an older answer
/// still retrying never reaches Apple after a newer one.
///
/// Order is the answers' place on the consumption topic (key `transaction_id`: one partition, offsets in order;
/// for an answer parked on topics.retries, the place it was first read), else the order they began here. The
/// last place of each transaction is remembered after its answer ends (the newest 10,000 transactions), so an
/// older answer read late from topics.retries is still known to be older.
///
/// An app's policy answers only where no grant service did: while a grant service's answer of the transaction is
/// in hand, a policy's answer is superseded already when it begins, and a grant service's answer supersedes a
/// policy's whatever their places (the policy's may have been read first, its ledger check made before the grant
/// service's answer was recorded).
package final class AnswerSuccession: Sendable {
    /// Where an answer was first read.
    package typealias Place = ReadPlace

    package struct Ticket: Sendable {
        let transactionID: String
        let sequence: UInt64
        let place: Place?
        var byPolicy = false
    }

    /// The newest answer of a transaction begun from grant services, and from its app's policy: each kind is
    /// ordered among its own, so a policy's answer never hides how new the grant services' newest is.
    private struct Newest {
        var service: Ticket?
        var policy: Ticket?
    }

    private struct Entry {
        /// The answer in force: the one that is not superseded.
        var latest: Ticket
        var newest: Newest
        /// A grant service's answer began since the transaction's answers last all ended: a policy's yields to it.
        var serviceInHand = false
        /// An answer of the transaction is calling Apple now; the next ones wait here.
        var sending = false
        var waiting: [CheckedContinuation<Void, Never>] = []
        var running = 0
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var sequence: UInt64 = 0
        /// Transactions whose answers all ended, oldest first, with their newest answers.
        var ended: [String: Newest] = [:]
        var endedOrder: [String] = []
    }

    private let state = Mutex(State())
    package static let remembered = 10_000

    /// Starts an answer; nil when a newer answer of the transaction began before it (it is superseded already), or,
    /// for a policy's answer, when a grant service's is in hand.
    package func begin(transactionID: String, place: Place?, byPolicy: Bool = false) -> Ticket? {
        state.withLock { state in
            state.sequence += 1
            let ticket = Ticket(
                transactionID: transactionID, sequence: state.sequence, place: place, byPolicy: byPolicy)
            let running = state.entries[transactionID]
            var newest = running?.newest ?? state.ended[transactionID] ?? Newest()
            if byPolicy {
                // Never over a grant service's answer in hand (one that ended is the ledger's to weigh: it may
                // have answered a request opened again since); among the policy's own, the newest.
                if running?.serviceInHand == true { return nil }
                if let policy = newest.policy, Self.isNewer(policy, than: ticket) { return nil }
                newest.policy = ticket
            } else {
                // Over any policy's answer, whatever their places; among grant services', the newest.
                if let service = newest.service, Self.isNewer(service, than: ticket) { return nil }
                newest.service = ticket
            }
            var entry = running ?? Entry(latest: ticket, newest: newest)
            entry.latest = ticket
            entry.newest = newest
            entry.serviceInHand = entry.serviceInHand || !byPolicy
            entry.running += 1
            state.entries[transactionID] = entry
            return ticket
        }
    }

    /// Whether a newer answer of the transaction began since `ticket`'s.
    package func isSuperseded(_ ticket: Ticket) -> Bool {
        state.withLock { $0.entries[ticket.transactionID]?.latest.sequence != ticket.sequence }
    }

    /// Runs `call` once no other answer of the transaction is calling Apple; nil (without calling) when the
    /// answer was superseded meanwhile.
    package func call<T: Sendable>(_ ticket: Ticket, _ body: () async throws -> T) async throws -> T? {
        await acquire(ticket.transactionID)
        defer { release(ticket.transactionID) }
        if isSuperseded(ticket) { return nil }
        return try await body()
    }

    /// Ends an answer (sent, refused, superseded or let go).
    package func end(_ ticket: Ticket) {
        state.withLock { state in
            guard var entry = state.entries[ticket.transactionID] else { return }
            entry.running -= 1
            guard entry.running <= 0, !entry.sending, entry.waiting.isEmpty else {
                state.entries[ticket.transactionID] = entry
                return
            }
            state.entries[ticket.transactionID] = nil
            if state.ended.updateValue(entry.newest, forKey: ticket.transactionID) == nil {
                state.endedOrder.append(ticket.transactionID)
            }
            if state.endedOrder.count > Self.remembered {
                let dropped = state.endedOrder.count - Self.remembered
                for key in state.endedOrder.prefix(dropped) where state.entries[key] == nil { state.ended[key] = nil }
                state.endedOrder.removeFirst(dropped)
            }
        }
    }

    /// Transactions with an answer in hand now (for tests).
    package var active: Int { state.withLock { $0.entries.count } }

    private func acquire(_ key: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let go = state.withLock { state -> Bool in
                guard var entry = state.entries[key] else { return true }
                defer { state.entries[key] = entry }
                if entry.sending {
                    entry.waiting.append(continuation)
                    return false
                }
                entry.sending = true
                return true
            }
            if go { continuation.resume() }
        }
    }

    private func release(_ key: String) {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard var entry = state.entries[key] else { return nil }
            defer { state.entries[key] = entry }
            guard !entry.waiting.isEmpty else {
                entry.sending = false
                return nil
            }
            return entry.waiting.removeFirst()  // the turn passes on: still sending
        }
        next?.resume()
    }

    /// `a` was produced after `b`: a later offset of one partition, else a later start here.
    private static func isNewer(_ a: Ticket, than b: Ticket) -> Bool {
        if let first = a.place, let second = b.place, first.topicPartition == second.topicPartition {
            return first.offset > second.offset
        }
        return a.sequence > b.sequence
    }
}
