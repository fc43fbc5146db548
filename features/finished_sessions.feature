Feature: Nothing is lost from a finished session
  A session that is over keeps its last turn even when the harness never wrote that the turn
  ended (Claude Code 1.0.x writes `stop_reason: null` and no turn-end record); a live one keeps
  the completeness guard (§4.3); a finished session that is resumed adds only its new turns, in
  a chapter linked to the final one, and rewrites nothing (issue #15).

  Scenario: A finished 1.0.x session keeps every prompt and its last reply
    Given machine "A" has a Claude Code 1.0.x session that never marks a turn as ended
    When machine "A" archives that session as live
    Then its chapters hold the first 2 prompts and not the last reply
    When machine "A" archives that session as finished
    Then its chapters hold every prompt and the last reply verbatim, each once
    And exactly one chapter is marked ended: incomplete-turn
    When the session is resumed with one more turn and machine "A" archives it again
    Then only that turn is archived, in a chapter that continues the final one
    And no chapter archived before was changed
