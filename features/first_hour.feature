Feature: A new user's first hour
  A new user clones the project and has two Claude Code sessions copied in from another machine:
  the files are new, their records are weeks old, and the second one's last reply was never
  marked as finished (as Claude Code up to 2.1.62 writes it). Everything they type is the
  README's, through the real `chapters` command in a real git repository, with their own home
  directory and nothing set in the environment.

  Background:
    Given a fresh git repository and a home directory of its own
    And two Claude Code sessions of this project copied into ~/.claude/projects, written weeks ago

  Scenario: Import everything, list it, open a search hit where it matched
    When the user runs "chapters import claude-code"
    Then every turn of both sessions is archived, the unfinished last one included
    And "chapters list" shows both sessions, each line with an id and no line over 100 columns
    And git status shows nothing of the archive
    When the user runs "chapters search" for words of the first session
    Then the search prints no warning
    And "chapters show <id> --line L" of its first hit prints the anchor's text

  Scenario: A project-scope install names no machine path and imports the sessions
    When the user runs "chapters install claude-code"
    Then .claude/settings.json and .mcp.json run "chapters" and hold no absolute path
    And the install says it imported 2 sessions, and every turn of both is archived
    And the hook it wrote runs as written and prints the session-start notice
