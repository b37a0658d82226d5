import Foundation
import Logging
import TGApp
import Testing

@Suite struct JSONLogHandlerTests {
    @Test func writesOneJSONObjectPerLineWithEscapedText() throws {
        let sink = CapturingLogSink()
        let logger = capturingLogger(sink)
        logger.info("quote \" newline \n tab \t", metadata: ["count": .stringConvertible(3), "who": "ann"])
        let line = try #require(sink.lines.first)
        #expect(!line.contains("\n"))
        let object = decodeJSON(line)
        #expect(object["message"] as? String == "quote \" newline \n tab \t")
        #expect(object["count"] as? Int == 3)
        #expect(object["who"] as? String == "ann")
        #expect(object["level"] as? String == "info")
    }

    @Test func redactsMetadataWhoseKeyNamesACredential() throws {
        let sink = CapturingLogSink()
        let logger = capturingLogger(sink)
        logger.warning(
            "oops",
            metadata: [
                "refresh_token": "rt-SECRET", "client_secret": "cs-SECRET", "authorization": "Bearer SECRET",
                "nested": ["code_verifier": "v-SECRET"], "status_code": .stringConvertible(401),
            ]
        )
        let line = try #require(sink.lines.first)
        #expect(!line.contains("SECRET"))
        #expect(decodeJSON(line)["status_code"] as? Int == 401)
    }

    @Test func dropsMessagesBelowTheLevel() {
        let sink = CapturingLogSink()
        let logger = capturingLogger(sink, level: .warning)
        logger.info("quiet")
        logger.error("loud")
        #expect(sink.lines.count == 1)
    }
}
