import Kafka
import Observability
import Synchronization

/// What the runtime stops reading while there is no room: the byte budget, full groups, parked lanes.
extension ConsumerRuntime {
    /// Pauses what must wait: every topic while the replica holds twice its byte budget; otherwise the topics
    /// feeding a full group whose messages cannot be parked, and the park topic's partition of each full
    /// group's lane (its parked messages wait there; the other lanes are read on). Called by the event loop and
    /// the commit loop: the consumer serialises the state and the librdkafka calls, and applies them to its
    /// real assignment.
    func adjustIntake() {
        let pressure = scheduler.pressure()
        do {
            if pressure.memoryFull {
                if try consumer.pauseIntake() { logger.debug("intake paused: the replica's byte budget is full") }
                return
            }
            let full = pressure.fullGroups
            let parking = activeParking
            var topics = Set(
                configuration.routes.filter { route in
                    !(route.parks && parking != nil) && !full.isEmpty
                        && route.groups.map { !$0.isDisjoint(with: full) } ?? true
                }.map(\.topic))
            var partitions = Set<TopicPartition>()
            if let parking {
                for group in full where feedsParking(group) {
                    if let partition = parkPartition(of: group) {
                        partitions.insert(TopicPartition(topic: parking.topic, partition: partition))
                    } else {
                        topics.insert(parking.topic)
                    }
                }
            }
            if try consumer.pauseIntake(topics: topics, partitions: partitions) {
                logger.debug(
                    "intake changed",
                    [
                        "paused_topics": topics.sorted().joined(separator: ","),
                        "paused_partitions": partitions.map(\.description).sorted().joined(separator: ","),
                    ])
            }
        } catch {
            logger.warning("cannot pause or resume intake; it will be tried again", ["error": "\(error)"])
        }
    }

    /// The park topic when it is read (routes that park pause their own topics without it).
    var activeParking: RuntimeConfiguration.Parking? {
        guard let parking = configuration.parking else { return nil }
        return state.withLock { $0.subscribed.contains(parking.topic) } ? parking : nil
    }

    /// Whether `group`'s messages may wait on the park topic: a group of a route that parks.
    func feedsParking(_ group: String) -> Bool {
        configuration.routes.contains { $0.parks && ($0.groups?.contains(group) ?? true) }
    }
}
