Feature: Rules are proposed once and approved on each machine by its own human
  A rule is a prompt by another name, shared across machines, so it affects no machine's
  notice until that machine's human approves it (§7.2, §11.3, amendment 2026-09-20).
  Approved rules render into the notice under a budget; over it the notice refuses with
  numbers and clips nothing (§7.3). Exit criterion P3.

  Background:
    Given a local-path pool
    And machine "A" linked to the pool
    And machine "B" linked to the pool
    And machine "C" linked to the pool

  Scenario: A rule affects only the machines whose human approved it
    When machine "A" proposes the rule "Run the suite with -x before committing." in category "testing"
    And machine "A" syncs
    And machine "B" syncs
    And machine "C" syncs
    Then machine "B" lists the rule "A/001" as "proposed"
    And machine "C" lists the rule "A/001" as "proposed"
    And the rule "A/001" is in the notice of no machine
    When machine "B" approves the rule "A/001"
    Then machine "B"'s notice shows the rule "A/001" verbatim
    And the rule "A/001" is not in the notices of machines "A" and "C"
    And the rule file of "A/001" is byte-identical on machines "A" and "B"
    When machine "B" syncs
    And machine "A" syncs
    And machine "C" syncs
    And machine "B" syncs
    Then machines "A" and "C" hold machine "B"'s approval in their stores
    And machine "B"'s notice shows the rule "A/001" verbatim
    And the rule "A/001" is not in the notices of machines "A" and "C"
    And machine "A" lists the rule "A/001" as "proposed"
    When machine "B" revokes the rule "A/001"
    Then the rule "A/001" is in the notice of no machine
    And machine "B" lists the rule "A/001" as "revoked"

  Scenario: An approved core set over the budget is refused with numbers
    Given machine "B" caps its core rules at 40 tokens
    When machine "A" proposes the rule "Run the suite with -x before committing." in category "testing"
    And machine "A" proposes the rule "Docs use the user's words and real commands." in category "docs"
    And machine "A" proposes the rule "Rebase feature branches; never merge main into them." in category "git"
    And machine "A" syncs
    And machine "B" syncs
    And machine "B" approves the rule "A/001"
    And machine "B" approves the rule "A/002"
    And machine "B" approves the rule "A/003"
    Then machine "B"'s notice refuses its 3 core rules over the budget of 40 tokens
    And the refusal gives each core rule's size and the total
    And no core rule's text is in machine "B"'s notice
    When machine "B" revokes the rule "A/003"
    Then machine "B"'s notice shows the rule "A/001" verbatim
    And machine "B"'s notice shows the rule "A/002" verbatim
