import Synchronization
import Testing

@testable import Kafka
@testable import Observability
import CRdKafka

@Suite("Kafka configuration")
struct KafkaConfigurationTests {
    let quiet = Logger(label: "test", minimumLevel: .critical)

    @Test("an unknown librdkafka property stops start-up with the key's name")
    func unknownPropertyNamesKey() throws {
        let configuration = KafkaProducer.Configuration(
            bootstrapServers: "127.0.0.1:1", properties: ["no.such.key": "1"])
        let error = #expect(throws: KafkaError.self) { try KafkaProducer(configuration: configuration, logger: quiet) }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.property == "no.such.key")
        #expect(error.map { "\($0)" }?.contains("kafka.no.such.key") == true)
    }

    @Test("a bad value of a secret key is reported by key, never by value")
    func secretValueNotEchoed() throws {
        let secret = "hunter2-super-secret"
        let configuration = KafkaConsumer.Configuration(
            bootstrapServers: "127.0.0.1:1", groupID: "g", properties: ["sasl.password.bogus": secret])
        let error = #expect(throws: KafkaError.self) { try KafkaConsumer(configuration: configuration, logger: quiet) }
        #expect(error?.property == "sasl.password.bogus")
        #expect(error.map { "\($0)" }?.contains(secret) == false)
    }

    @Test("idempotence and acks=all cannot be turned off", arguments: [("enable.idempotence", "false"), ("acks", "1")])
    func idempotenceIsRequired(key: String, value: String) throws {
        let configuration = KafkaProducer.Configuration(bootstrapServers: "127.0.0.1:1", properties: [key: value])
        let error = #expect(throws: KafkaError.self) { try KafkaProducer(configuration: configuration, logger: quiet) }
        #expect(error?.property == key)
        #expect(error.map { "\($0)" }?.contains("kafka.\(key)") == true)
    }

    @Test("auto-commit cannot be turned on")
    func autoCommitRefused() throws {
        let configuration = KafkaConsumer.Configuration(
            bootstrapServers: "127.0.0.1:1", groupID: "g", properties: ["enable.auto.commit": "true"])
        let error = #expect(throws: KafkaError.self) { try KafkaConsumer(configuration: configuration, logger: quiet) }
        #expect(error?.property == "enable.auto.commit")
    }

    @Test("operator properties win over the typed fields")
    func overridesWin() throws {
        var configuration = KafkaProducer.Configuration(bootstrapServers: "a:1", properties: ["linger.ms": "50"])
        configuration.linger = .milliseconds(5)
        let properties = try configuration.librdkafkaProperties()
        #expect(properties["linger.ms"] == "50")
        #expect(properties["bootstrap.servers"] == "a:1")
        #expect(properties["enable.idempotence"] == "true")
    }

    @Test("librdkafka's own log lines reach the project's logger")
    func librdkafkaLogsRouted() throws {
        let lines = Mutex<[String]>([])
        let logger = Logger(
            label: "kafka", minimumLevel: .debug, sink: LogSink { line in lines.withLock { $0.append(line) } })
        // A consumer-only property on a producer makes librdkafka warn (CONFWARN) while it starts.
        let configuration = KafkaProducer.Configuration(
            bootstrapServers: "127.0.0.1:1", properties: ["auto.offset.reset": "earliest"])
        _ = try KafkaProducer(configuration: configuration, logger: logger)
        let warning = lines.withLock { $0 }.first { $0.contains("CONFWARN") }
        #expect(warning?.contains("\"source\":\"librdkafka\"") == true)
        #expect(warning?.contains("\"level\":\"warning\"") == true)
    }
}

@Suite("Kafka errors")
struct KafkaErrorTests {
    @Test("transport failures and timeouts are retriable, configuration errors are not")
    func classification() {
        #expect(KafkaError(.init(rawValue: -195)).isRetriable)  // _TRANSPORT
        #expect(KafkaError(.init(rawValue: -192)).isRetriable)  // _MSG_TIMED_OUT
        #expect(KafkaError(.init(rawValue: 7)).isRetriable)  // REQUEST_TIMED_OUT
        #expect(!KafkaError(.init(rawValue: 10)).isRetriable)  // MSG_SIZE_TOO_LARGE
        #expect(KafkaError(.init(rawValue: -150)).isFatal)  // _FATAL
        #expect(KafkaError(.init(rawValue: -195)).code.name == "_TRANSPORT")
    }
}
