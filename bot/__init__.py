"""decode-bot: turn a GitHub event into a pull request written by a sandboxed coding agent."""

__version__ = "0.1.0"
