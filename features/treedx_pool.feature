Feature: A TreeDX service as the knowledge pool
  Teams that keep their pool in a TreeDX service share chapters exactly as through a git pool
  (amendment 2026-09-21): the provider seam is a drop-in, so search, list and the read path
  see no difference. The service is a fake that behaves like the real server
  (treedx/CONTRACT.md), spoken to over HTTP on loopback, through the composition root.

  Background:
    Given a TreeDX pool served by the fake on loopback

  Scenario: Two machines share one TreeDX pool
    Given machine "A" linked to the pool with the pool's token
    And machine "B" linked to the pool with the pool's token
    When machine "A" archives session "a-1"
    And machine "A" syncs
    And machine "B" syncs
    Then machine "B" lists every chapter of session "a-1" from the pool, written by "A"
    And machine "B" holds every chapter of session "a-1" in its own store, byte for byte
    And machine "B" finds the chapters of session "a-1" by searching "retry loop"
    And the TreeDX pool holds every file machine "A" published
    And no mirror holds the TreeDX keep file or a token

  Scenario: Three machines push at the same moment
    Given machine "A" archives session "a-1"
    And machine "B" archives session "b-1"
    And machine "C" archives session "c-1"
    And machines "A", "B" and "C" linked to the pool, retrying a taken lease every 100 ms
    When machines "A", "B" and "C" sync at the same moment while each commit holds the lease 300 ms
    Then the TreeDX lease was contended, and every machine pushed after at most 2 rebuilds
    And after one more sync each, the three mirrors hold the same files
    And every store holds every machine's chapters and the TreeDX pool lost nothing
    And no TreeDX commit was written over a head its writer had not seen

  Scenario: The head moves out of band between pull and push
    Given machine "A" linked to the pool with the pool's token
    And machine "A" archives session "a-1"
    And machine "A" syncs
    And machine "A" archives session "a-2"
    When the TreeDX pool's head moves out of band right after machine "A"'s next pull
    And machine "A" syncs
    Then machine "A"'s sync saw the push diverge, rebuilt the mirror and pushed
    And the TreeDX pool holds every file machine "A" published
    And the TreeDX pool still holds the out-of-band file
    And no TreeDX commit was written over a head its writer had not seen

  Scenario: The TreeDX service is down, then back
    Given machine "A" linked to the pool with the pool's token
    And machine "A" pushes right after every archive
    And machine "A" archives session "a-1"
    When the TreeDX service goes down
    And machine "A" archives session "a-2"
    Then the archive of session "a-2" succeeded while the pool was unreachable
    And machine "A"'s status says local-only with the code "network" and session "a-2" pending
    When the TreeDX service comes back
    And machine "A" syncs
    Then the sync pushed and nothing is pending
    And the TreeDX pool holds every file machine "A" published

  Scenario: The TreeDX service is busy: short spells are waited out, long ones degrade
    Given machine "A" linked to the pool with the pool's token
    And machine "A" gives each TreeDX request 1000 ms
    And machine "A" archives session "a-1"
    And machine "A" archives session "a-2"
    When the TreeDX service answers "server_busy" 2 times with retryAfterMs 50
    And machine "A" syncs
    Then the sync pushed and nothing is pending
    And the TreeDX service answered busy 2 times
    When machine "A" archives session "a-3"
    And the TreeDX service answers "server_busy" 100 times with retryAfterMs 600
    And machine "A" syncs
    Then machine "A"'s status says local-only with the code "timeout" and session "a-3" pending
    When the TreeDX service is no longer busy
    And machine "A" syncs
    Then the sync pushed and nothing is pending
    And the TreeDX pool holds every file machine "A" published

  Scenario: A revoked token
    Given machine "A" linked to the pool with the pool's token
    And machine "A" archives session "a-1"
    And machine "A" syncs
    When the TreeDX pool's token is revoked
    And machine "A" archives session "a-2"
    And machine "A" syncs
    Then the sync fails with the code "auth" and a re-link instruction
    And machine "A"'s status says local-only with the code "auth" and session "a-2" pending
    When machine "A" links the pool again with a fresh token
    And machine "A" syncs
    Then the sync pushed and nothing is pending
    And no TreeDX token appears in any output, workspace file or answer of the service

  Scenario: knowledgeProvider must agree with the TreeDX scheme
    Given machine "A" archives session "a-1"
    And machine "A" sets knowledgeProvider to "git"
    Then linking machine "A" to the pool is refused, naming the "treedx" provider
    When machine "A" sets knowledgeProvider to "treedx"
    And machine "A" links the pool with a fresh token
    And machine "A" syncs
    Then the sync pushed and nothing is pending
    And the TreeDX pool holds every file machine "A" published
