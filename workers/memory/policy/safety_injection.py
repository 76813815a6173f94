"""The prompt-injection rows of the safety stage, as data.

Each row is a *structure*, not a sentence: an imperative aimed at the model with an override or
exfiltration object ("ignore" + "all previous" + "instructions"), a persona switch with an
unrestricted qualifier, a role marker of a chat template, a request for the system prompt, an
instruction addressed to "the AI reading this". The families and their vocabulary come from
public taxonomies and sets: context ignoring and goal hijacking (Perez & Ribeiro 2022, the
Rebuff and Vigil heuristics, HackAPrompt), persona switches (the DAN prompts), fake role
markers (ChatML, Llama 2 and 3, Gemma, Alpaca, Mistral tool tags), prompt leaking, indirect
injection hidden in documents (Greshake et al. 2023: Markdown and HTML comments, "[system]"
blocks, data sent out through an image URL), and their translations in the multilingual sets.
Every row also runs on the de-obfuscated view (:mod:`workers.memory.policy.safety_unmask`), so
zero-width characters, look-alike letters, leetspeak and spaced-out letters hide nothing.

Each row keeps its regex off most text with gates: whole words for the English rows (a verb
*and* a noun, answered by one set of the text's words per scan), a leading punctuation
character for the markers, ``non_ascii`` for Cyrillic and CJK rows. Vocabulary was chosen on
the ``dev`` split of ``bench/data/write_policy/safety.jsonl`` and the public lists above, never
on ``holdout``'s cases or misses (its templates were in view: see ``make_safety.py``).
"""

from __future__ import annotations

from workers.memory.policy.safety_injection_langs import LANGUAGE_ROWS
from workers.memory.policy.safety_patterns import PatternSpec, injection_row

__all__ = ("INJECTION_PATTERNS",)


_STRONG = (
    "all|any|every|previous|prior|above|earlier|preceding|foregoing|former|original|initial"
    "|your|system|safety|existing|aforementioned|above-mentioned"
)
"""Qualifiers that make "ignore ... instructions" about *the model's* instructions."""
_QUALIFIER = (
    _STRONG + "|each|of|the|these|those|old|current|given|other|and|or|following|that|this"
    "|default|standard|built-in|hidden|core|internal|ethical|content"
)
_MINE = r"(?!(?:(?:" + _QUALIFIER + r")\s+){0,3}?(?:my|our)\s)"
"""A writer correcting themselves ("ignore my previous instructions") is not an attack."""
_VERBS = (
    r"ignor(?:e|ing)|disregard(?:ing)?|forget(?:ting)?|overrid(?:e|ing)|bypass(?:ing)?"
    r"|skip(?:ping)?|discard(?:ing)?|drop|abandon|neglect(?:ing)?|overlook|omit|scrap|cancel"
    r"|throw\s+out|set\s+aside|put\s+aside|pay\s+no\s+attention\s+to|never\s*mind"
    r"|(?:do\s+not|don[’']?t|never)\s+(?:follow|obey|listen\s+to|adhere\s+to|comply\s+with)"
    r"|stop\s+(?:following|obeying|listening\s+to)"
)
_OBJECTS = (
    r"instructions?|prompts?|directives?|directions|rules|guidelines|guardrails|constraints"
    r"|restrictions|limitations|programming|training|commands|orders|policies|guidance"
    r"|system\s+prompt|safeguards"
)
"""What the model was told: ignoring any of these, qualified as the model's, is an attack."""
_GENERIC = r"inputs?|text|content|messages?|context|conversation|data|requests?|tasks?"
"""Plain text: only "all/any previous ..." of it is (people ignore "the previous message")."""
_POSITION = r"previous|prior|above|earlier|preceding|foregoing|former|initial|original"
_VERB_GATE = (
    "ignore|ignoring|disregard|disregarding|forget|forgetting|override|overriding|bypass"
    "|bypassing|skip|skipping|discard|discarding|drop|abandon|neglect|neglecting|overlook|omit"
    "|scrap|cancel|throw|aside|attention|nevermind|mind|follow|following|obey|obeying|listen"
    "|listening|adhere|comply"
)
_VERB_OBJECTS = (
    "instruction|instructions|prompt|prompts|directive|directives|directions|rules|guidelines"
    "|guardrails|constraints|restrictions|limitations|programming|training|commands|orders"
    "|policies|guidance|safeguards|input|inputs|text|content|message|messages|context"
    "|conversation|data|request|requests|task|tasks|above|far|previously|now|point|this"
)
_LIMITS = (
    r"(?:any\s+|all\s+)?(?:(?:content|safety|ethical|moral)\s+)?(?:restrictions|limits"
    r"|limitations|filters|rules|guidelines|censorship|ethics|morals|boundaries|safeguards"
    r"|policies)"
)
_AI = (
    r"AI|A\.I\.|LLMs?|GPT|chatbot|(?:large\s+)?language\s+models?"
    r"|AI\s+(?:assistant|agent|model|system|tool)s?|ChatGPT|Claude|Gemini|Copilot|Bard"
)
"""Names for the model reading the text ("assistant" or "agent" alone name people too)."""
_AI_GATE = "ai|llm|llms|gpt|chatbot|language|chatgpt|claude|gemini|copilot|bard"

INJECTION_PATTERNS: tuple[PatternSpec, ...] = (
    # ------------------------------------------------------------ fake role and tool markers
    # Special tokens of chat templates (ChatML, Llama 3, Phi, Mistral): "<|" never opens prose.
    # (Gated by a regex: a gate's literals are "|"-separated, so cannot hold "<|".)
    injection_row(r"<\|[a-z][a-z0-9_]{1,30}\|>|<(?:start|end)_of_turn>", "", pre=r"<\||_of_turn>"),
    # Every branch opens with a literal punctuation character and the letters are matched
    # case-insensitively inside (?i:...): the regex engine then skips in C to the next "[",
    # "<", "#", "{" or '"', which costs less than any literal gate. ("[admin](url)" is a
    # Markdown link, not a marker.)
    injection_row(
        r"\[(?i:/?INST\]|/?(?:SYSTEM_PROMPT|TOOL_CALLS|AVAILABLE_TOOLS)\]|system\]\(#[\w-]+\)"
        r"|(?:system|admin|administrator|developer|sudo)(?:[ \t]+(?:message|note|prompt"
        r"|override|instructions?|update|alert))?\](?!\())"
        r"|<(?i:<\s*/?SYS\s*>>|/?system>|/?(?:tool_call|tool_use|tool_code|function_calls?"
        r"|tool_result)>|invoke\s+name=|function=[\w.-]+>)"
        r"|#(?<![^\s\"'>:]#)(?i:#{1,3}[ \t]*(?:system|instructions?|response|human|assistant)"
        r"[ \t]*:)"
        r"|\{(?i:\s*\"(?:name|tool)\"\s*:\s*\"[^\"]{1,64}\"\s*,\s*\"(?:arguments|parameters"
        r"|input)\"\s*:)"
        r"|\"(?i:role\"\s*:\s*\"(?:system|developer)\"|(?:function_call|tool_calls)\"\s*:\s*[\[{])",
        "",
        ignore_case=False,
    ),
    # A tool call addressed in the Harmony / function-calling syntax ("to=functions.send").
    injection_row(
        r"\bto=(?:functions|multi_tool_use)\.[\w-]+",
        "to=functions|to=multi_tool_use",
    ),
    # Upper-case role headers ("SYSTEM OVERRIDE", "SYSTEM: you must ..."): case matters, and
    # "SYSTEM:" counts with an order to the model after it ("SYSTEM: backup done" is a log line).
    injection_row(
        r"[SAD](?<![\w-][SAD])(?:(?:YSTEM|DMIN|EVELOPER)[ \t]+(?:OVERRIDE|MESSAGE|NOTE|PROMPT"
        r"|UPDATE|ALERT|INSTRUCTIONS?|COMMAND)\b|(?:YSTEM|DMIN)[ \t]*:[ \t]*(?i:you\b|ignore"
        r"|disregard|forget|override|new\s+instructions?|from\s+now|the\s+(?:assistant|AI|model)"
        r"|(?:always|never|do\s+not|don[’']?t|must|reveal|print|output)\b))",
        "",
        ignore_case=False,
    ),
    # ------------------------------------------------------------ context ignoring
    # "Ignore all previous instructions" and its family: a verb, a qualifier that points at the
    # model's own instructions, a noun; or "all previous" + any text; or "everything above".
    injection_row(
        r"\b(?:"
        + _VERBS
        + r")\s+(?:"
        + _MINE
        + r"(?=(?:(?:"
        + _QUALIFIER
        + r")\s+){0,3}?(?:"
        + _STRONG
        + r")\s)"
        r"(?:(?:" + _QUALIFIER + r")\s+){1,4}(?:" + _OBJECTS + r")\b"
        r"|(?:(?:the|of)\s+)*(?:all|any|every)\s+(?:(?:of\s+)?(?:the|your)\s+)?"
        r"(?:" + _POSITION + r")\s+(?:(?:and|or)\s+\w+\s+)?(?:" + _GENERIC + r")\b"
        r"|(?:everything|anything|all)\s+(?:(?:written|said|stated|mentioned|you\s+read)\s+)?"
        r"(?:above|so\s+far|previously|until\s+now|up\s+to\s+(?:now|this\s+point)"
        r"|before\s+(?:this|now))\b)",
        _VERB_GATE,
        _VERB_OBJECTS,
        words=True,
    ),
    injection_row(
        r"\b(?:forget|disregard|ignore)\s+(?:about\s+)?(?:everything|all(?:\s+(?:of\s+)?(?:that|this))?|anything"
        r"|what(?:ever)?)\s*,?\s+(?:(?:that\s+)?you\s+(?:were|have\s+been|[’']ve\s+been|was|got)"
        r"\s+(?:told|given|taught|instructed|trained)|you\s+(?:know|learned)|(?:above|before"
        r"|so\s+far|previously|earlier|prior|until\s+now|up\s+to\s+now)(?:\s+(?:that|this))?"
        r"(?=\s*(?:[.,;:!]|$|and\b|then\b|now\b)))",
        "forget|disregard|ignore",
        "everything|all|anything|what|whatever",
        words=True,
    ),
    # Instructions declared void: "your previous instructions are revoked", "the rules you were
    # given no longer apply". The noun must be the model's (your / system / all previous ...).
    injection_row(
        r"(?:\b(?:your|the\s+system[’']?s?|any|all\s+(?:(?:of\s+)?(?:the|your)\s+)?(?:"
        + _POSITION
        + r"|safety|system))\s+(?:(?:"
        + _POSITION
        + r"|old|current|existing|safety|content|system|ethical|default)\s+){0,2}"
        r"(?:instructions|rules|guidelines|directives|restrictions|constraints|limitations"
        r"|filters|programming|guardrails|safeguards|policies|system\s+prompt|prompt)"
        r"|\b(?:" + _POSITION + r")\s+(?:instructions|directives|prompts?|system\s+prompt"
        r"|programming)"
        r"|\b(?:instructions|rules|guidelines|directives|restrictions|constraints|limitations"
        r"|filters)\s+(?:that\s+)?you\s+(?:were|have\s+been|[’']ve\s+been|had\s+been|got)"
        r"\s+(?:given|told|taught|trained\s+(?:on|with)|programmed\s+with))"
        r"\s+(?:(?:are|is|were|have\s+been|has\s+been)\s+(?:(?:now|hereby|officially|all"
        r"|completely|henceforth)\s+)*(?:void|null|cancell?ed|revoked|rescinded|obsolete"
        r"|overridden|superseded|lifted|suspended|disabled|deactivated|invalid(?:ated)?"
        r"|withdrawn|no\s+longer\s+(?:valid|in\s+effect|active|applicable|binding|in\s+force))"
        r"|(?:now\s+)?(?:no\s+longer|do\s+not|don[’']?t|does\s+not|doesn[’']?t|won[’']?t|will\s+not)"
        r"\s+apply)"
        r"|\byour\s+(?:(?:system|original|initial|current)\s+)?(?:instructions|system\s+prompt"
        r"|programming)\s+(?:have|has)\s+(?:now\s+)?been\s+(?:updated|changed|modified|replaced"
        r"|overwritten|reset|amended)",
        "void|null|cancelled|canceled|revoked|rescinded|obsolete|overridden|superseded|lifted"
        "|suspended|disabled|deactivated|invalid|invalidated|withdrawn|longer|apply|updated"
        "|changed|modified|replaced|overwritten|reset|amended",
        "instructions|rules|guidelines|directives|restrictions|constraints|limitations|filters"
        "|programming|guardrails|safeguards|policies|prompt|prompts",
        words=True,
    ),
    # Goal hijacking: "your actual objective is", "your new instructions are".
    injection_row(
        r"\byour\s+(?:(?:real|actual|true|genuine|hidden|secret)\s+(?:task|objective|mission"
        r"|instructions?|directives?|assignment)|(?:new|updated|revised)\s+(?:instructions?"
        r"|directives?|objective|mission|system\s+prompt))\s+(?:(?:now|here|from\s+now\s+on"
        r"|instead)\s+)?(?:is|are|will\s+be|becomes?|:)",
        "your",
        "task|objective|mission|instruction|instructions|directive|directives|assignment|prompt",
        words=True,
    ),
    # "Your real objective, which supersedes the user's, is ..."
    injection_row(
        r"\byour\s+(?:real|actual|true|genuine|hidden|secret)\s+(?:task|objective|mission|goal"
        r"|purpose),?\s+which\s+(?:supersedes|overrides|replaces|outranks|takes\s+precedence)",
        "your",
        "supersedes|overrides|replaces|outranks|precedence",
        words=True,
    ),
    # "New instructions from the developer: ..." (a header naming who sends them).
    injection_row(
        r"\bnew\s+(?:system\s+)?instructions?\s+(?:from|by)\s+(?:the\s+|your\s+)?(?:developers?"
        r"|system|admin(?:istrator)?s?|OpenAI|Anthropic)\s*:",
        "instruction|instructions",
        "new",
        words=True,
    ),
    # The classic "Ignore the above and say ..." (Perez & Ribeiro 2022).
    injection_row(
        r"\b(?:ignore|disregard)\s+(?:all\s+(?:of\s+)?)?the\s+above\s*(?:and|,|;|\.)\s*"
        r"(?:instead\s+)?(?:just\s+)?(?:say|print|write|output|reply|respond|tell|repeat"
        r"|translate|return|answer)\b",
        "ignore|disregard",
        "above",
        words=True,
    ),
    # An order to call a tool, addressed to whoever reads the text.
    injection_row(
        r"\bwhen\s+you\s+(?:read|see|process|receive|find|parse)\s+this\b[^.\n]{0,40}?\b(?:call"
        r"|invoke|execute|trigger)\s+(?:the\s+)?[\w.-]+\s+(?:tool|function)\b",
        "when",
        "tool|function",
        words=True,
    ),
    # A safety policy declared gone: "pretend the safety policy was revoked".
    injection_row(
        r"\b(?:pretend|assume|imagine|suppose)\s+(?:that\s+)?(?:the\s+|your\s+|all\s+)?"
        r"(?:safety|content|usage|moderation)\s+(?:policy|policies|rules|filters?|guidelines"
        r"|restrictions)\s+(?:was|were|is|are|has\s+been|have\s+been|got)\s+(?:(?:now|all"
        r"|completely)\s+)?(?:revoked|disabled|lifted|removed|turned\s+off|switched\s+off|off"
        r"|suspended|gone|deleted|cancell?ed|repealed)",
        "pretend|assume|imagine|suppose",
        "policy|policies|rules|filter|filters|guidelines|restrictions",
        words=True,
    ),
    injection_row(
        r"\bnew\s+(?:system\s+)?instructions?\s*:|\bfrom\s+now\s+on,?\s+you\s+(?:will|must"
        r"|shall|are\s+to|should)\s+(?:ignore|obey|only|answer|respond|act|reply|always|never)\b",
        "instruction|instructions|now",
        "new|on",
        words=True,
    ),
    # ------------------------------------------------------------ persona switches
    injection_row(
        r"\b(?:you\s+are|you[’']?re)\s+(?:now|henceforth|from\s+now\s+on)\s+(?:(?:an?|the|in)\s+)?"
        r"(?:DAN\b|(?:in\s+)?(?:developer|god|jailbreak|jailbroken|unrestricted|unfiltered|debug"
        r"|admin|sudo|dan|evil|chaos)\s+mode|no\s+longer\b|(?:(?:completely|totally|fully)\s+)?"
        r"(?:unrestricted|unfiltered|uncensored|jailbroken|unbound|unshackled|limitless|amoral"
        r"|unethical|evil|rogue|free\s+(?:of|from))\b)"
        r"|\bfrom\s+now\s+on,?\s+(?:you\s+are|you[’']?re)\s+(?:(?:an?|the)\s+)?(?:(?-i:DAN)(?![\w-])"
        r"|(?:(?:completely|totally|fully)\s+)?(?:unrestricted|unfiltered|uncensored|jailbroken"
        r"|unbound|amoral|evil|rogue)\b|an?\s+(?:AI|assistant|model|chatbot)\s+(?:without|with\s+no"
        r"|free\s+(?:of|from))\s+(?:any\s+)?(?:restrictions|limits|rules|filters|guidelines))"
        r"|\b(?:you\s+are|you[’']?re)\s+(?-i:DAN)(?![\w-])"
        r"|\b(?:you\s+are|you[’']?re)\s+no\s+longer\s+(?:bound|restricted|limited|constrained"
        r"|required\s+to\s+follow|an?\s+(?:AI|assistant|language\s+model|chatbot)|ChatGPT"
        r"|Claude|Gemini|Llama|Bard|Copilot)\b",
        "you|youre",
        "now|henceforth|longer|dan",
        words=True,
    ),
    injection_row(
        r"\b(?:act|behave|respond|answer|reply|roleplay|role-play|pose)\s+(?:as|like)\s+"
        r"(?:if\s+you\s+(?:were|are)\s+)?(?:(?:an?|the)\s+)?(?:(?:DAN|unrestricted|unfiltered"
        r"|uncensored|jailbroken)\b|(?:[\w-]+\s+){0,3}?(?:AI|assistant|model|chatbot|bot|entity"
        r"|persona|version\s+of\s+yourself)\s+(?:that\s+has\s+|which\s+has\s+|who\s+has\s+)?"
        r"(?:without|with\s+no|free\s+(?:of|from)|unbound\s+by)\s+" + _LIMITS + r")"
        r"|\bpretend\s+(?:to\s+be|you\s+are|you[’']?re|that\s+you\s+(?:are|have))\s+"
        r"(?:[\w-]+\s+){0,5}?(?:without|with\s+no|no|free\s+(?:of|from))\s+" + _LIMITS,
        "act|behave|respond|answer|reply|roleplay|role-play|pose|pretend",
        "dan|unrestricted|unfiltered|uncensored|jailbroken|without|no|free|unbound",
        words=True,
    ),
    injection_row(
        r"\b(?:enter|enable|activate|switch\s+(?:to|into)|turn\s+on|go\s+into|unlock)\s+"
        r"(?:the\s+)?(?:DAN|jailbreak|god|unrestricted|unfiltered|uncensored|evil|chaos)\s+mode\b"
        r"|\b(?:developer|jailbreak|DAN|god)\s+mode\s+(?:is\s+(?:now\s+)?)?(?:enabled|activated"
        r"|engaged|unlocked|on)(?=\s*(?:[.!:;,)\]]|$))|\bdo\s+anything\s+now\b",
        "mode|anything",
        words=True,
    ),
    # ------------------------------------------------------------ prompt leaking, exfiltration
    injection_row(
        r"\b(?:reveal|print|show|output|repeat|leak|display|dump|expose|disclose|divulge|recite"
        r"|spell\s+out|write\s+out|tell|give|share|paste|return|list)\s+(?:me\s+|us\s+)?"
        r"(?:back\s+)?(?:all\s+(?:of\s+)?)?(?:your|the|its)\s+(?:(?:full|entire|exact|complete"
        r"|whole|original|initial|hidden|secret|internal|confidential|verbatim|raw|current)\s+)"
        r"{0,3}(?:system\s+(?:prompt|message|instructions?)|(?:initial|original|hidden|secret"
        r"|internal|developer|pre-?|starting|base)\s*(?:instructions|prompt|directives)"
        r"|instructions\s+(?:you\s+were\s+given|above))"
        r"|\bwhat\s+(?:is|are|was|were)\s+your\s+(?:system\s+prompt|(?:initial|original|hidden"
        r"|secret|exact|system|first)\s+(?:instructions|prompt|directives))"
        r"|\brepeat\s+(?:all\s+(?:of\s+)?)?(?:the\s+)?(?:words|text|sentences?|lines"
        r"|everything|content)\s+(?:above|before\s+this|preceding|so\s+far"
        r"|from\s+the\s+(?:start|beginning))"
        r"|\b(?:repeat|print|output|show|reveal|recite)\s+(?:me\s+)?(?:all\s+)?(?:the\s+)?"
        r"(?:previous|preceding|above|prior|initial|first)\s+(?:text|words|prompt|instructions)"
        r"(?:\s+(?:verbatim|word\s+for\s+word))?\b",
        "prompt|instructions|directives|repeat|text|words",
        "system|initial|original|hidden|secret|internal|developer|pre|starting|base|given|above"
        "|exact|first|preceding|prior|previous|so|beginning|start|preprompt|pre-prompt",
        words=True,
    ),
    injection_row(
        r"\b(?:send|e-?mail|post|forward|upload|exfiltrate|transmit|leak|append|encode)\s+"
        r"(?:[\w’'-]+\s+){0,4}?(?:api\s+keys?|passwords?|credentials|secrets|tokens|private\s+keys?"
        r"|ssh\s+keys?|env(?:ironment)?\s+variables|cookies|session\s+ids?|conversation"
        r"(?:\s+history)?|chat\s+(?:history|logs?)|memories|system\s+prompt)\s+(?:[\w’'-]+\s+){0,3}?"
        r"(?:to|into|in)\s+(?:https?://|www\.|[\w.+-]+@[\w-]+\.|(?:this|that|the\s+following)"
        r"\s+(?:url|link|address|endpoint|server|webhook)|(?:an?\s+)?(?:image|link)\s+url)",
        "send|email|e-mail|mail|post|forward|upload|exfiltrate|transmit|leak|append|encode",
        "key|keys|password|passwords|credentials|secrets|tokens|variables|cookies|ids"
        "|conversation|history|logs|log|memories|prompt",
        words=True,
    ),
    # Data sent out through a Markdown image whose URL carries a template to fill in.
    injection_row(
        r"!\[[^\]\n]{0,64}\]\(\s*https?://[^\s)]{1,200}?[?&][\w.-]{1,32}=(?:\{|\$\{?|%7B|\[|<)",
        "](",
    ),
    # ------------------------------------------------------------ addressed to the model
    injection_row(
        r"\b(?:note|message|instructions?|attention|reminder|important|hint|memo|notice"
        r"|warning|request)\s*(?:to|for)\s+(?:the\s+|any\s+|all\s+|every\s+|an?\s+)?"
        r"(?:" + _AI + r")\b(?!\s+(?:team|group|club|researchers?|engineers?|department"
        r"|course|class|ethics|safety|policy|conference|workshop|meetup|reading|startups?"
        r"|compan(?:y|ies)|labs?|newsletter|act|regulations?|hype|industry)\b)"
        r"|\bif\s+you\s+are\s+(?:an?\s+)?(?:" + _AI + r"|automated\s+(?:agent|system"
        r"|assistant))\b(?!\s+(?:researcher|engineer|enthusiast|expert|student|developer"
        r"|company|startup|team|fan|skeptic|user)s?\b)"
        r"|\b(?:" + _AI + r")\s+(?:that\s+(?:is|are)\s+|who\s+(?:is|are)\s+)?(?:reading"
        r"|processing|parsing|summari[sz]ing|analy[sz]ing|crawling|scraping|ingesting"
        r"|indexing)\s+(?:this|these)\b"
        r"|\bdear\s+(?:AI|LLM|chatbot|language\s+model|AI\s+(?:assistant|agent|model))\b",
        _AI_GATE,
        "note|message|instruction|instructions|attention|reminder|important|hint|memo|notice"
        "|warning|request|if|reading|processing|parsing|summarizing|summarising|analyzing"
        "|analysing|crawling|scraping|ingesting|indexing|dear",
        words=True,
    ),
    # Hidden comments that address the model (Greshake et al.: instructions in page markup).
    injection_row(
        r"(?:<!--|\[//\]:\s*#\s*[(<\"'])\s*(?:(?:hidden\s+|secret\s+)?(?:note|message"
        r"|instructions?|prompt|reminder)\s*(?:to|for)?\s*(?:the\s+|any\s+)?)?(?:"
        + _AI
        + r"|assistant|agent|model|system)s?\s*[:,\-—]",
        "<!--|[//]:",
    ),
    # ------------------------------------------------------------ spaced-out letters, glued
    # "i g n o r e a l l ..." collapses to one word in the view: the same structures, unspaced.
    injection_row(
        r"(?:ignor(?:e|ing)|disregard|forget|bypass|override|skip|neglect)(?:all|any|every|the"
        r"|your|of|and|previous|prior|above|earlier|preceding|system|safety|original|initial"
        r"|former)+(?:instructions?|prompts?|directives?|rules|guidelines|guardrails"
        r"|restrictions|input|context)"
        r"|(?:reveal|print|show|output|repeat|leak|display|dump)(?:me)?(?:your|the)(?:full"
        r"|entire|original|initial|hidden)?systemprompt"
        r"|youarenow(?:in)?(?:developer|god|jailbreak|dan|unrestricted)mode|youarenowdan"
        r"|(?:developer|jailbreak|dan)mode(?:enabled|activated)",
        "ignor|disregard|forget|bypass|override|skip|neglect|systemprompt|mode|youarenowdan",
        view_only=True,
    ),
    *LANGUAGE_ROWS,
)
"""The injection rows, run after the secret and personal-data rows."""
