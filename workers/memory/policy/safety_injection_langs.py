"""The prompt-injection rows for languages other than English, as data.

The core families in each language — ignore or forget the previous instructions, a persona
without restrictions, show the system prompt — with the verbs, qualifiers and nouns their
speakers use, from the translated injection sets (Russian and Chinese first: the seeds'
languages). Rows for Cyrillic and CJK text carry ``non_ascii``, so ASCII text never pays for
them; the Latin-script rows gate on whole words that English text does not use.
"""

from __future__ import annotations

from workers.memory.policy.safety_patterns import PatternSpec, injection_row

__all__ = ("LANGUAGE_ROWS",)

LANGUAGE_ROWS: tuple[PatternSpec, ...] = (
    # One row per language family, so English text (which shares "ignor" and "instruc") never
    # pays for their regexes. Russian and Chinese first: they are the seeds' languages.
    injection_row(
        r"(?:проигнорир\w*|игнорир\w*|забуд\w*|забыва\w*|отбрось\w*|отбрасыва\w*|отмени\w*"
        r"|пренебр\w*|не\s+(?:следуй\w*|слушай\w*|соблюдай\w*|выполняй\w*|подчиняй\w*)"
        r"|не\s+обращай\w*\s+внимания\s+на|перестань\w*\s+следовать)\s+"
        r"(?:(?:\w+,?\s+){0,3}?(?:вс[еёя]\w*|предыдущ\w*|прежн\w*|прошл\w*|ранее|ранн\w*|тво\w+"
        r"|ваш\w*|сво\w+|системн\w*|исходн\w*|изначальн\w*|стар\w+|вышеуказанн\w*|данн\w*)\s+"
        r"(?:\w+\s+){0,2}?(?:инструкци|указани|правил|промпт|директив|ограничени|установк"
        r"|команд|требовани|настройк)\w*"
        r"|(?:инструкци|указани|правил|промпт|директив|ограничени|установк|команд|требовани)"
        r"\w*\s+(?:выше|ранее|раньше|до\s+этого))"
        r"|забуд\w*\s+вс[её],?\s+(?:(?:что|чему)\s+(?:тебе|вам|тебя|вас)\s+\w+"
        r"|(?:что\s+было\s+)?(?:выше|сказанное|предыдущее|раньше|до\s+этого))",
        "игнор|забуд|забыв|отбро|отбрас|отмен|пренебр|не след|не слуш|не собл|не выполн"
        "|не подчин|внимани|перестань",
        non_ascii=True,
    ),
    injection_row(
        r"(?:теперь\s+ты|ты\s+теперь|отныне\s+ты|с\s+этого\s+момента\s+ты)\s+(?:\w+\s+){0,3}?"
        r"(?:DAN|ДАН|без\s+(?:каких-либо\s+|всяких\s+|любых\s+)?(?:ограничений|правил|цензуры"
        r"|фильтров)|неограниченн\w*|нецензурн\w*|взломанн\w*|свободн\w*\s+от)"
        r"|режим\w*\s+(?:разработчика|DAN|без\s+ограничений)"
        r"|(?:притворись|представь,?\s+что\s+ты|веди\s+себя\s+как)\s+(?:\w+\s+){0,4}?без\s+"
        r"(?:ограничений|правил|цензуры|фильтров)"
        r"|(?:покажи|выведи|раскрой|напиши|повтори|скажи|сообщи|выдай)\w*\s+(?:мне\s+)?"
        r"(?:(?:свой|свои|своё|твой|твои|твоё|ваш|ваши|весь|всю|все)\s+)?(?:системн\w+\s+"
        r"(?:промпт|подсказк|инструкци|сообщени)\w*|исходн\w+\s+инструкци\w*|скрыт\w+\s+"
        r"инструкци\w*)",
        "теперь ты|ты теперь|отныне|с этого момента|режим|притворись|представь|веди себя"
        "|системн|исходн|скрыт",
        non_ascii=True,
    ),
    injection_row(
        r"(?:忽略|忽视|无视|忘记|忘掉|不要理会|不要理睬|别理会|不用理会|不要遵守|不要遵循|别管"
        r"|抛开|抛弃|放弃)(?:掉)?(?:你)?(?:之前|以前|先前|此前|上面|以上|上述|前面|原来|原有"
        r"|原先|所有|全部|一切|你的|系统)[^，。,.!！?？\s]{0,6}?"
        r"(?:指令|指示|说明|提示词?|规则|设定|要求|约束|限制|命令|规定)"
        r"|你现在是(?:一个)?(?:没有任何限制|不受(?:任何)?限制|无限制|没有限制|DAN|越狱)"
        r"|(?:开发者|越狱|DAN)模式"
        r"|(?:扮演|假装(?:你是)?)(?:一个)?[^，。,.]{0,10}(?:没有任何限制|不受限制|无限制)"
        r"|(?:输出|显示|告诉我|泄露|重复|打印|透露|给我看)(?:一下)?(?:你的|你)?"
        r"(?:系统提示词?|系统指令|初始指令|原始指令|隐藏指令|系统消息)",
        "忽|无视|忘|理会|理睬|遵|别管|抛|放弃|你现在是|模式|扮演|假装|系统|指令",
        non_ascii=True,
    ),
    injection_row(
        r"\b(?:ignora|ignore|ignorar|olvida|olvide|olvidar|omite|omita|descarta|descarte"
        r"|haz\s+caso\s+omiso\s+(?:a|de))\s+(?:\w+\s+){0,3}?(?:instrucciones|indicaciones|reglas"
        r"|directrices|órdenes|normas)"
        r"|\b(?:ignore|ignora|esqueça|esqueca|desconsidere|desconsidera)\s+(?:\w+\s+){0,3}?"
        r"(?:instruções|instrucoes|regras|diretrizes|orientações)"
        r"|\b(?:ignora|ignorate|dimentica|dimenticate|trascura)\s+(?:\w+\s+){0,3}?"
        r"(?:istruzioni|regole|indicazioni|direttive)"
        r"|\b(?:olvida|olvide|ignora|ignore|esqueça|esqueca|dimentica|ignorate)\s+(?:todo|tudo"
        r"|tutto)\s+(?:lo\s+anterior|lo\s+dicho|o\s+que\s+foi\s+dito|(?:quello|ciò)\s+che\s+"
        r"(?:precede|ti\s+è\s+stato\s+detto)|acima|anterior)"
        r"|\b(?:ahora|a\s+partir\s+de\s+ahora)\s+eres\s+(?:\w+\s+){0,2}?(?:DAN|sin\s+"
        r"(?:restricciones|límites|filtros))|\bagora\s+você\s+é\s+(?:\w+\s+){0,2}?(?:DAN|sem\s+"
        r"(?:restrições|limites|filtros))|\bora\s+sei\s+(?:\w+\s+){0,2}?(?:DAN|senza\s+"
        r"(?:restrizioni|limiti|filtri))",
        "instrucciones|indicaciones|reglas|directrices|órdenes|normas|instruções|instrucoes"
        "|regras|diretrizes|orientações|istruzioni|regole|indicazioni|direttive|eres|você|sei"
        "|todo|tudo|tutto",
        words=True,
    ),
    injection_row(
        r"\b(?:ignorier\w*|vergiss|vergessen\s+Sie|missachte\w*|überspring\w*|befolge\s+nicht"
        r"|beachte\s+nicht)\s+(?!nicht\b)(?:\w+\s+){0,3}?(?:Anweisungen|Instruktionen|Regeln"
        r"|Befehle|Vorgaben|Richtlinien|Anordnungen)"
        r"|\b(?:vergiss|vergessen\s+Sie)\s+alles,?\s+(?:davor|zuvor|bisher|vorher|bisherige|oben"
        r"|was\s+(?:du|dir|Sie|Ihnen)\b)"
        r"|\bdu\s+bist\s+(?:jetzt|nun|ab\s+sofort)\s+(?:ein[e]?\s+)?(?:DAN|uneingeschränkt\w*"
        r"|ohne\s+(?:Regeln|Einschränkungen|Filter))|\bEntwicklermodus\b",
        "ignoriere|ignorier|ignorieren|ignoriert|vergiss|vergessen|missachte|missachten"
        "|überspringe|überspring|befolge|beachte|du|entwicklermodus",
        words=True,
    ),
    injection_row(
        r"\b(?:ignore[zr]?|oublie[zr]?|ne\s+tiens\s+pas\s+compte\s+d\w*|ne\s+tenez\s+pas\s+compte"
        r"\s+d\w*|fais\s+abstraction\s+d\w*)\s+(?:(?:\w+\s+){0,2}?(?:toutes|tous|tes|vos|ces)\s+"
        r"(?:\w+\s+)?(?:instructions|consignes|règles|directives)|(?:\w+\s+){0,3}?(?:instructions"
        r"|consignes|règles|directives)\s+(?:précédentes|antérieures|ci-dessus|d'avant"
        r"|initiales|du\s+système))"
        r"|\b(?:oublie[zr]?|ignore[zr]?)\s+tout\s+ce\s+qui\s+(?:précède|a\s+été\s+dit)"
        r"|\b(?:tu\s+es|vous\s+êtes)\s+(?:maintenant|désormais)\s+(?:\w+\s+){0,2}?(?:DAN|sans\s+"
        r"(?:restrictions|limites|filtres|règles))",
        "ignore|ignorez|ignorer|oublie|oubliez|oublier|compte|abstraction|maintenant|désormais",
        "instructions|consignes|règles|directives|dan|sans|tout",
        words=True,
    ),
    injection_row(
        r"(?:以前|前|上記|これまで|今まで|先ほど|最初|全て|すべて)の(?:すべての|全ての)?"
        r"(?:指示|命令|ルール|指令|設定|制約|プロンプト)(?:を|は)(?:すべて|全て)?(?:無視|忘れ)"
        r"|(?:開発者|脱獄)モード|制限のない(?:AI|アシスタント)"
        r"|システムプロンプトを(?:表示|出力|教え|見せ)",
        "無視|忘れ|モード|制限のない|システムプロンプト",
        non_ascii=True,
    ),
    injection_row(
        r"(?:이전|위|앞|모든|기존|지금까지)(?:의)?\s*(?:모든\s*)?(?:지시|지침|명령|규칙|프롬프트)"
        r"(?:사항)?(?:을|를|은|는)?\s*(?:모두\s*|전부\s*)?(?:무시|잊)"
        r"|(?:개발자|탈옥)\s*모드|시스템\s*프롬프트를?\s*(?:보여|출력|알려)",
        "무시|잊|모드|프롬프트",
        non_ascii=True,
    ),
)
"""One row per language family, run after the English rows."""
