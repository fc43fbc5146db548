Feature: An agent finds yesterday's work from another machine
  Claude Code archives its sessions through its hooks (PreCompact, SessionEnd); a new session
  is told which project it is in (SessionStart); and its agent finds and reads past chapters
  over MCP, from every machine that shares the pool (issue #8).

  Scenario: A Claude Code session archived on machine A is found by an agent on machine B
    Given a local-path pool
    And machine "A" linked to the pool
    And machine "B" linked to the pool
    And machine "A" pushes right after every archive
    And machine "B" waits up to 60 seconds for its session-start pull
    When a Claude Code session on machine "A" compacts after half of its transcript
    And that Claude Code session on machine "A" ends
    Then the hooks archived every turn of that session on machine "A" exactly once
    When a new Claude Code session starts on machine "B"
    Then its SessionStart notice names the project
    When an agent on machine "B" calls chapters_search for "token bucket rate limiting"
    Then the answer holds a chapter of machine "A"'s session
    And chapters_read on machine "B" returns that chapter verbatim as machine "A" archived it
