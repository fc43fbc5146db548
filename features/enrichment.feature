Feature: Model enrichment, never on the critical path
  A model relabels archived chapters after the fact (§6): idempotent and re-runnable, a
  failing model keeps the deterministic values, vocabulary merges are git-visible and
  revertible, and turning it off leaves a fully working corpus. Exit criterion P2.

  Scenario: Enriching a corpus twice gives identical files the second time
    Given a model server playing the tape "enrich-valid"
    And machine "A" enriches with the model "tape/enricher-1"
    And machine "A" archives session "a-1"
    And machine "A" archives session "a-2"
    When machine "A" runs the enrichment
    Then every chapter of machine "A" was enriched by "tape/enricher-1" in 1 model call each
    And every chapter of machine "A" keeps its body byte for byte
    When machine "A" runs the enrichment again over all its chapters
    Then no chapter file of machine "A" changed and the model got no new request
    And the enrichment report of machine "A" lists every chapter "enriched" by "model tape/enricher-1"

  Scenario: A newer model re-annotates and records its provenance
    Given a model server playing the tape "enrich-valid"
    And machine "A" enriches with the model "tape/enricher-1"
    And machine "A" archives session "a-1"
    And machine "A" runs the enrichment
    When machine "A" switches to the model "tape/enricher-2"
    And machine "A" runs the enrichment again over all its chapters
    Then every chapter of machine "A" has the provenance chain "tape/enricher-2, tape/enricher-1, deterministic"

  Scenario: A model that fails twice leaves deterministic values, and provenance says so
    Given a model server playing the tape "enrich-invalid-twice"
    And machine "A" enriches with the model "tape/broken"
    And machine "A" archives session "a-1"
    When machine "A" runs the enrichment
    Then no chapter file of machine "A" changed since its archive
    And every chapter of machine "A" has the provenance chain "deterministic"
    And the enrichment report of machine "A" lists every chapter "fallback" because "invalid-twice"
    And the model got 2 requests per chapter of machine "A"

  Scenario: Invalid JSON answered by valid JSON on the retry
    Given a model server playing the tape "enrich-invalid-then-valid"
    And machine "A" enriches with the model "tape/flaky"
    And machine "A" archives session "a-1"
    When machine "A" runs the enrichment
    Then every chapter of machine "A" was enriched by "tape/flaky" in 2 model calls each

  Scenario Outline: A slow or absent model server keeps every chapter as archived
    Given a model server playing the tape "<tape>"
    And machine "A" enriches with the model "<model>"
    And machine "A" archives session "a-1"
    When machine "A" runs the enrichment, which reports a server failure
    Then no chapter file of machine "A" changed since its archive
    And the enrichment report of machine "A" lists 1 chapter "fallback" because "<reason>"
    And every chapter of machine "A" is still queued

    Examples:
      | tape           | model           | reason  |
      | enrich-timeout | tape/slow       | timeout |
      | enrich-down    | tape/enricher-1 | down    |

  Scenario: The archive and a fork never call the model
    Given a model server playing the tape "enrich-valid"
    And a local-path pool
    And machine "A" linked to the pool
    And machine "A" pushes right after every archive
    And machine "A" enriches with the model "tape/enricher-1" on the trigger "both"
    And background enrichment drains are recorded, not started
    When machine "A" archives session "a-1"
    And machine "A" archives a fork "a-1-fork" of session "a-1"
    Then the model got no request
    And every chapter of machine "A" is still queued
    And machine "A" started a drain "after-push" and a drain "idle"
    When the model server stops
    And machine "A" archives session "a-2"
    Then the last archive wrote chapters and the model got no request
    When machine "A" runs the enrichment, which reports a server failure
    Then no chapter file of machine "A" changed since its archive

  Scenario: Disabling enrichment leaves search, notice and sync fully working
    Given a model server playing the tape "enrich-valid"
    And a local-path pool
    And machine "A" linked to the pool
    And machine "B" linked to the pool
    And machine "A" enriches with the model "tape/enricher-1"
    And machine "A" turns enrichment off
    When machine "A" archives session "a-1"
    And machine "A" runs the enrichment
    And machine "A" syncs
    And machine "B" syncs
    Then the model got no request
    And machine "A" has no enrichment queue and its status says enrichment is off
    And machine "B" holds machine "A"'s chapters of session "a-1" byte for byte
    And machine "B" finds the chapters of session "a-1" by searching "retry 503 backoff"
    And machine "A" finds the chapters of session "a-1" by searching "retry 503 backoff"
    And machine "A"'s notice for session "a-1" lists all its chapters

  Scenario: Two machines: A's enriched frontmatter reaches B byte for byte
    Given a model server playing the tape "enrich-valid"
    And a local-path pool
    And machine "A" linked to the pool
    And machine "B" linked to the pool
    And machine "A" enriches with the model "tape/enricher-1"
    And machine "A" archives session "a-1"
    When machine "A" runs the enrichment
    And machine "A" syncs
    And machine "B" syncs
    Then machine "B" holds machine "A"'s chapters of session "a-1" byte for byte
    And the pool holds machine "A"'s enriched chapters of session "a-1" byte for byte
    And machine "B"'s index files A's chapters of session "a-1" under the topic "http-client"
    And machine "B" finds "Make the HTTP client retry 503 answers with exponential backoff" first by searching "exponential backoff"
    And machine "B" does not enrich machine "A"'s chapters

  Scenario: A vocabulary merge is a git-visible fact, and reverting it restores the vocabulary
    Given a model server playing the tape "enrich-valid"
    And a local-path pool
    And machine "A" linked to the pool
    And machine "B" linked to the pool
    And machine "A" enriches with the model "tape/enricher-1"
    And machine "A" applies vocabulary merges
    And machine "A" archives session "a-1"
    And machine "A" archives session "a-2"
    And machine "A" archives session "a-3"
    And machine "A" runs the enrichment
    And machine "A" merges the topic "pypi" into "packaging" by hand
    And machine "A" syncs
    And machine "B" syncs and rebuilds its index
    And machine "B"'s vocabulary is remembered
    When machine "A" builds its index
    And machine "A" syncs
    Then the pool's history shows a commit by "A" adding the plugin's topic-alias "retry" -> "retries"
    When machine "B" syncs and rebuilds its index
    Then machine "B"'s vocabulary maps "retry" to "retries"
    When that commit is reverted with git in a clone of the pool and pushed back
    And machine "B" syncs and rebuilds its index
    Then machine "B"'s vocabulary is byte for byte the remembered one
