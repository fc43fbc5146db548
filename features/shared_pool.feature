Feature: Two machines share one knowledge pool
  Many machines feed one private pool with zero merge conflicts by construction (§3.3),
  and a broken network never breaks the archive (§5.3). Exit criterion P1.

  Scenario: Machine B reads machine A's chapters through a local-path pool
    Given a local-path pool
    And machine "A" linked to the pool
    And machine "B" linked to the pool
    When machine "A" archives session "a-1"
    And machine "A" syncs
    And machine "B" syncs
    Then machine "B" lists the pool's chapters of session "a-1" written by "A"
    And machine "B" has the chapters of session "a-1" in its own store
    And machine "B" finds the chapters of session "a-1" by searching "retry 503 backoff"
    And machine "B" does not publish machine "A"'s files as its own
    And the pool passes "git fsck --strict"
    And the pool's history is fast-forward only and authored by "A"
    And a git clone of the pool shows the pool layout

  Scenario: The pool is unreachable, the archive is not
    Given an HTTP pool served by git http-backend on loopback
    And machine "A" linked to the pool with the pool's token
    And machine "A" pushes right after every archive
    And machine "A" archives session "a-1"
    When the pool goes offline
    And machine "A" archives session "a-2"
    Then the archive succeeded and wrote 2 chapters
    And machine "A"'s status says local-only with the code "network" and 3 pending
    When the pool comes back
    And machine "A" syncs
    Then the sync pushed and nothing is pending
    And the pool holds every file machine "A" published
    And the pool passes "git fsck --strict"

  Scenario: Two machines push at the same moment
    Given a local-path pool
    And machine "A" linked to the pool
    And machine "B" linked to the pool
    And machine "A" archives session "a-1"
    And machine "B" archives session "b-1"
    And machine "A" syncs
    And machine "B" syncs
    And machine "A" archives session "a-2"
    And machine "B" archives session "b-2"
    When machines "A" and "B" sync at the same moment
    Then exactly one of them diverged, rebuilt and pushed
    And after one more sync each, both mirrors hold the same files
    And no file of either store is missing from the pool
    And the pool passes "git fsck --strict"
    And the pool's history is fast-forward only and authored by "A" and "B"

  Scenario: A wrong token on a network pool
    Given an HTTP pool served by git http-backend on loopback
    And machine "A" linked to the pool with the token "wrong-token-7f3e9a1c"
    And machine "A" archives session "a-1"
    When machine "A" syncs
    Then the sync fails with the code "auth" and a re-link instruction
    And machine "A"'s status says local-only with the code "auth" and 3 pending
    And the token "wrong-token-7f3e9a1c" appears in no output, no workspace file and no server log
