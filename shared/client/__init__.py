"""The API client layer: requests to the API server (aiohttp), leader election and its write
fence, and the writes the operators share (status, Service). Imports ``shared.api`` only."""
