import Testing

@testable import TGHTTPServer

@Suite struct BridgeStateMachineTests {
    @Test func queuesAtOnceWhenTheHandlerFinishedInline() {
        var machine = BridgeStateMachine<Int>()
        #expect(machine.complete(1) == .none)
        guard case .queue(1) = machine.startReturned() else {
            Issue.record("expected to queue the inline answer")
            return
        }
        #expect(machine.takeResponse() == nil)
    }

    @Test func suspendsThenAsksForOneResumeWhenTheAnswerComesLater() {
        var machine = BridgeStateMachine<Int>()
        guard case .suspend = machine.startReturned() else {
            Issue.record("expected to suspend")
            return
        }
        #expect(machine.complete(7) == .resume)
        #expect(machine.takeResponse() == 7)
        #expect(machine.takeResponse() == nil)
    }

    @Test func keepsTheFirstAnswerWhenADeadlineAndTheHandlerBothComplete() {
        var machine = BridgeStateMachine<Int>()
        _ = machine.startReturned()
        #expect(machine.complete(503) == .resume)
        #expect(machine.complete(200) == .none)
        #expect(machine.takeResponse() == 503)
        #expect(machine.complete(200) == .none)
        #expect(machine.isFinished)
    }
}
