"""Task queries for the 210-tool snapshot (tests/data/discovery/catalogs.json), each with the tools that
would do it (public names under always-prefix: `{backend}__{tool}`). A hit is any of them in the top 5.

Written from the tasks' side: how a user asks, not the tool's words where they differ."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

TASK_QUERIES: Final[tuple[tuple[str, frozenset[str]], ...]] = tuple(
    (query, frozenset(expected.split()))
    for query, expected in (
        # github
        ("open a pull request on github", "github__create_pull_request"),
        ("file a new issue in a github repository", "github__create_issue"),
        ("comment on a github issue", "github__add_issue_comment"),
        ("merge the pull request", "github__merge_pull_request"),
        ("list open issues of a github repo", "github__list_issues"),
        ("close a github issue", "github__update_issue"),
        ("review a pull request and approve it", "github__create_pull_request_review"),
        ("which files changed in this pull request", "github__get_pull_request_files"),
        ("did the CI checks pass on the pull request", "github__get_pull_request_status"),
        ("fork a repository on github", "github__fork_repository gitlab__fork_repository"),
        ("search code on github for a function name", "github__search_code"),
        ("find github users by name", "github__search_users"),
        ("recent commits on a branch", "github__list_commits"),
        ("create a new branch", "github__create_branch gitlab__create_branch"),
        ("read a file from a github repository", "github__get_file_contents"),
        ("push several files in one commit to github", "github__push_files"),
        # gitlab
        ("open a merge request on gitlab", "gitlab__create_merge_request"),
        ("create a gitlab issue", "gitlab__create_issue"),
        ("create a new gitlab project", "gitlab__create_repository"),
        # slack
        ("send a message to a slack channel", "slack__slack_post_message"),
        ("reply in a slack thread", "slack__slack_reply_to_thread"),
        ("add an emoji reaction to a slack message", "slack__slack_add_reaction"),
        ("list the slack channels", "slack__slack_list_channels"),
        ("read recent messages of a slack channel", "slack__slack_get_channel_history"),
        ("get a slack user's profile", "slack__slack_get_user_profile"),
        # notion
        ("search notion pages", "notion__API-post-search"),
        ("create a notion page", "notion__API-post-page"),
        ("add a comment to a notion page", "notion__API-create-a-comment"),
        ("query a notion database", "notion__API-query-data-source notion__API-retrieve-a-database"),
        ("append blocks to a notion page", "notion__API-patch-block-children"),
        ("read a notion page as markdown", "notion__API-retrieve-page-markdown"),
        ("delete a notion block", "notion__API-delete-a-block"),
        ("list notion users", "notion__API-get-users"),
        # filesystem
        ("read a text file from disk", "filesystem__read_text_file filesystem__read_file"),
        ("write a file to disk", "filesystem__write_file"),
        ("edit lines in a local file", "filesystem__edit_file"),
        ("make a new directory", "filesystem__create_directory"),
        ("list the files in a folder", "filesystem__list_directory filesystem__list_directory_with_sizes"),
        ("show the directory tree", "filesystem__directory_tree"),
        ("rename or move a file", "filesystem__move_file"),
        ("find files matching a pattern", "filesystem__search_files"),
        ("file size and modification time", "filesystem__get_file_info"),
        ("read an image file", "filesystem__read_media_file"),
        # playwright / devtools
        (
            "take a screenshot of the web page in the browser",
            "playwright__browser_take_screenshot devtools__take_screenshot",
        ),
        ("navigate the browser to a url", "playwright__browser_navigate devtools__navigate_page"),
        ("click a button on the page", "playwright__browser_click devtools__click"),
        ("fill in a web form", "playwright__browser_fill_form devtools__fill_form devtools__fill"),
        ("type text into an input field", "playwright__browser_type devtools__type_text devtools__fill"),
        ("go back to the previous page", "playwright__browser_navigate_back devtools__navigate_page"),
        (
            "list the network requests the page made",
            "playwright__browser_network_requests devtools__list_network_requests",
        ),
        (
            "read the browser console messages",
            "playwright__browser_console_messages devtools__list_console_messages",
        ),
        ("run javascript in the page", "playwright__browser_evaluate devtools__evaluate_script"),
        ("record a performance trace of the page", "devtools__performance_start_trace"),
        ("run a lighthouse audit", "devtools__lighthouse_audit"),
        ("upload a file through the page", "playwright__browser_file_upload devtools__upload_file"),
        ("accept a javascript dialog", "playwright__browser_handle_dialog devtools__handle_dialog"),
        # kubernetes
        ("show the logs of a kubernetes pod", "kubernetes__kubectl_logs"),
        ("scale a deployment to 3 replicas", "kubernetes__kubectl_scale"),
        ("apply a kubernetes manifest", "kubernetes__kubectl_apply"),
        ("install a helm chart", "kubernetes__install_helm_chart"),
        ("run a command inside a pod", "kubernetes__exec_in_pod"),
        ("forward a local port to a pod", "kubernetes__port_forward"),
        ("describe a kubernetes resource", "kubernetes__kubectl_describe kubernetes__explain_resource"),
        ("switch kubernetes context", "kubernetes__kubectl_context"),
        ("roll back a deployment rollout", "kubernetes__kubectl_rollout"),
        # firecrawl
        ("scrape a web page to markdown", "firecrawl__firecrawl_scrape"),
        ("crawl a whole website", "firecrawl__firecrawl_crawl"),
        ("search the web", "firecrawl__firecrawl_search"),
        ("extract structured data from web pages", "firecrawl__firecrawl_extract"),
        ("map all urls of a site", "firecrawl__firecrawl_map"),
        ("find research papers", "firecrawl__firecrawl_research_search_papers"),
        # memory, thinking, everything
        (
            "remember facts as entities in the knowledge graph",
            "memory__create_entities memory__add_observations",
        ),
        ("search the knowledge graph memory", "memory__search_nodes memory__read_graph"),
        ("forget an entity from memory", "memory__delete_entities"),
        ("think step by step through a hard problem", "thinking__sequentialthinking"),
        ("add two numbers", "everything__get-sum"),
        ("echo back a message", "everything__echo"),
    )
)

SNAPSHOT: Final = Path(__file__).parent / "data" / "discovery" / "catalogs.json"


def snapshot_tools() -> list[dict[str, Any]]:
    """The snapshot's 210 tools under always-prefix names, in the snapshot's backend order."""
    catalogs = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    return [
        {**tool, "name": f"{backend}__{tool['name']}"}
        for backend, tools in catalogs.items()
        for tool in tools
    ]
