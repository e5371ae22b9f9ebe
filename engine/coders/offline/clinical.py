"""A dermatologist's plain words, read as the offline coder's component choices.

guidance.py reads component keywords ("reweight", "a ResNet"); a dermatologist rarely writes those.
This module lists the families of things a dermatologist does write (goals, checks, concerns about
the data, preferences about the model, which error is worse) and the direction in the component
grammar (engine/offline_grammar.py) that the simulated agent takes for each. The table is documented for users in
docs/offline-guidance.md; keep the two in step.

Each family is a regular expression over the lower-cased guidance and what it asks for, as
(component key, value) pairs, the first the most direct. A family whose phrase carries its own
polarity ("don't miss", "keep all the data") is read as written (`polar=False`); for the others a
negation just before the phrase ("no neural network") asks for `negated` instead, or for nothing.

Relative values: "larger"/"smaller" (image_size), "more" (hp.longer: epochs or boosting rounds;
hp.regularise: regularisation strength), "neural" (model: a CNN or ResNet; with "model!": not one).

This is programmed behaviour of a simulated agent: a pilot with it tests a study's procedure, not
the effect of steering.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Ask = tuple[tuple[str, Any], ...]

_DARK = (r"(?:dark\w*|black|brown|deeply pigmented|pigmented skin|skin of colou?r|"
         r"fitzpatrick (?:types? )?(?:iv|v|vi|4|5|6)\b|(?:skin )?types? (?:v|vi|5|6)\b|fst ?(?:v|vi|5|6)\b|"
         r"\bv\s*(?:and|-|–|/|&|to)\s*vi\b)")
_GROUPS = r"(?:skin[- ]?(?:types?|tones?|colou?rs?)|phototypes?|fitzpatrick|complexions?|ethnic\w*)"
_ANY_GROUP = rf"(?:{_DARK}|light\w* skin|fair skin|white skin|{_GROUPS})"
_UNRECORDED = (rf"(?:unknown|missing|unrecorded|unlabell?ed|no)\W+{_GROUPS}"
               rf"|{_GROUPS}\W+(?:\w+\W+){{0,2}}?(?:unknown|not recorded|wasn'?t recorded|weren'?t recorded|"
               r"not known|not given|not documented|undocumented)")
_SENTENCE = r"[^.;!?]"  # a family's words are read within one sentence or clause


@dataclass(frozen=True)
class Family:
    name: str                 # the family, as docs/offline-guidance.md names it
    pattern: str
    asks: Ask
    negated: Ask = ()         # what a negated phrase asks for (nothing when empty)
    polar: bool = True        # False: the phrase carries its own polarity; negation is not read


FAMILIES: tuple[Family, ...] = (
    # -- goals about skin tone ---------------------------------------------------------------
    Family("cancers missed on darker skin",
           rf"miss\w*{_SENTENCE}{{0,50}}{_DARK}|{_DARK}{_SENTENCE}{{0,50}}"
           r"(?:miss|overlook|under-?diagnos|go(?:es)? unnoticed|unnoticed|diagnosed late)\w*",
           (("fairness", "group_balanced"), ("selection", "minimax")), polar=False),
    Family("equal performance across skin tones",
           r"(?:as well|equally|just as|as good|as accurate\w*|as reliabl\w*|the same|equal\w*|similar\w*|"
           rf"consistent\w*|comparabl\w*|no worse|uniform\w*){_SENTENCE}{{0,60}}{_ANY_GROUP}"
           r"|(?:worse|poorly|badly|less accurate|less reliabl\w*|fails?|struggles?|underperform\w*|biased|bias)"
           rf"{_SENTENCE}{{0,40}}{_DARK}"
           rf"|{_DARK}{_SENTENCE}{{0,40}}(?:worse|poorly|badly|less accurate|underperform\w*|struggl\w*)"
           rf"|(?:fair\w*|unbiased|equit\w*){_SENTENCE}{{0,20}}\b(?:to|for|across|towards|between)\b"
           rf"{_SENTENCE}{{0,20}}(?:{_ANY_GROUP}|patients|everyone)",
           (("fairness", "reweight"), ("selection", "minimax")), polar=False),
    Family("darker skin tones under-represented",
           r"(?:too few|not enough|not many|very few|few|fewer|only a few|only a handful|handful|"
           r"under-?represent\w*|rare|scarce|lack\w*|shortage|scarcity|little data|small number)"
           rf"{_SENTENCE}{{0,50}}{_DARK}"
           rf"|{_DARK}{_SENTENCE}{{0,50}}(?:under-?represent\w*|rare\b|scarce|are few|too few|not enough|"
           r"lacking|in short supply|a small (?:share|fraction|minority)|a minority)"
           rf"|(?:imbalanc\w*|unbalanced|skewed|uneven){_SENTENCE}{{0,30}}{_GROUPS}",
           (("fairness", "upsample"),), polar=False),
    Family("skin tone does not matter",
           r"(?:don'?t|do not|doesn'?t|does not|no need to|not) (?:\w+ )?(?:care|worry|matter|bother)\w*"
           r"[^.;!?]{0,30}(?:skin|fair\w*|tone|bias)"
           r"|(?:skin[- ]?(?:tone|type|colou?r)s?|fairness) (?:doesn'?t|does not|is not|isn'?t) (?:\w+ )?"
           r"(?:matter|important|a concern|relevant|my concern|the priority|a priority)"
           r"|(?:forget|ignore|never ?mind) (?:about )?(?:the )?(?:fairness|skin[- ]?(?:tones?|types?|colou?rs?))"
           r"|(?:only|just) (?:\w+ )?(?:overall|total|global) (?:performance|accuracy|auc\w*)",
           (("fairness", "none"), ("selection", "overall")), polar=False),
    # -- checks ----------------------------------------------------------------------------------
    Family("results per skin tone",
           r"(?:check|look|see|report|show|compare|evaluate|test|verify|make sure|confirm|measure|"
           r"break\w* (?:\w+ )?down|stratif\w*|tell me|how (?:well )?(?:does|do|did|will))"
           rf"{_SENTENCE}{{0,60}}(?:{_DARK}|light\w* skin|(?:each|every|per|by|across|separate\w*|"
           rf"individual\w*)\W+(?:\w+\W+){{0,2}}?{_GROUPS}|{_GROUPS}\W+(?:\w+\W+){{0,2}}?separately)"
           r"|(?:results?|performance|auc\w*|accuracy|sensitivity|specificity|metrics?|scores?|numbers)"
           rf"\W+(?:\w+\W+){{0,3}}?(?:per|for each|for every|by|across|separately for)\W+(?:\w+\W+)?{_GROUPS}",
           (("monitor_groups", True),)),
    # -- the data --------------------------------------------------------------------------------
    Family("colour and lighting vary",
           r"lighting|illuminat\w*|brightness|exposure|white balance"
           r"|(?:different|differing|varying|variable|various|inconsistent|uneven|poor|bad|changing)\s+"
           r"(?:(?!skin)\w+\s+)?(?:light\b|colou?rs?|cameras?|devices?|phones?|hues?|tints?)"
           r"|colou?r (?:cast|shifts?|differences?|varies|variation|calibration)"
           r"|(?:cameras?|phones?|devices?|clinics?) (?:differ|vary)",
           (("colour", "grey_world"), ("standardise", True))),
    Family("colour carries the diagnosis",
           r"colou?rs? (?:is|are) (?:\w+ )?(?:important|diagnostic|informative|meaningful|a (?:key|important) cue)"
           r"|colou?r matters|(?:don'?t|do not|never) (?:change|alter|normali[sz]e|correct|touch|adjust) "
           r"(?:the )?(?:image )?colou?rs?|keep (?:the )?(?:original|natural|true) colou?rs?",
           (("colour", "none"),), polar=False),
    Family("leave out the non-neoplastic conditions",
           r"(?:ignore|exclude|excluding|leave out|leaving out|remove|drop|skip|filter out|take out|get rid of|"
           r"discard|throw out|without)\W+(?:\w+\W+){0,3}?(?:inflammatory|non[- ]?cancerous|non[- ]?tumou?r\w*|"
           r"non[- ]?neoplastic|eczemas?|psoriasis|dermatitis|rash\w*|infections?|infectious)"
           r"|only (?:\w+ ){0,2}(?:tumou?rs|neoplasms|neoplastic|cancers? (?:and|vs\.?|versus) (?:benign )?"
           r"(?:tumou?rs|moles|naevi|nevi))"
           r"|(?:inflammatory|non[- ]?cancerous|eczema|psoriasis|dermatitis)[^.;!?]{0,40}(?:irrelevant|"
           r"not relevant|don'?t belong|shouldn'?t be|should not be|are noise|confus\w*|distract\w*)",
           (("filter_non_neoplastic", True),), (("filter_non_neoplastic", False),)),
    Family("keep the non-neoplastic conditions",
           r"(?:keep|include|including|retain)\W+(?:\w+\W+){0,3}?(?:inflammatory|non[- ]?cancerous|"
           r"non[- ]?neoplastic|eczemas?|psoriasis|dermatitis|rash\w*)",
           (("filter_non_neoplastic", False),), (("filter_non_neoplastic", True),)),
    Family("keep all the data",
           r"(?:don'?t|do not|never|no need to|shouldn'?t|should not|avoid)\W+(?:\w+\W+)?"
           r"(?:throw\w*|discard\w*|remov\w*|drop\w*|exclud\w*|delet\w*|los\w*|wast\w*|filter\w*|thin\w*)"
           r"(?: away| out)?\W+(?:\w+\W+){0,2}?(?:data|images|rows|lesions|pictures|photos|cases|samples|examples)"
           r"|(?:keep|use|train on) (?:all|every|each)(?: of)?(?: the| my| our)? (?:data|images?|rows?|lesions?|"
           r"pictures?|photos?|cases?|samples?)"
           r"|every (?:single )?(?:image|case|example|picture) (?:counts|matters)"
           r"|(?:data|images) (?:are|is) (?:too )?(?:precious|valuable)",
           (("filter_non_neoplastic", False), ("drop_unknown_tone", False)), polar=False),
    Family("keep images whose skin type was not recorded",
           rf"(?:keep|include|retain)\W+(?:\w+\W+){{0,4}}?(?:{_UNRECORDED})",
           (("drop_unknown_tone", False),), (("drop_unknown_tone", True),)),
    Family("skin type not recorded", _UNRECORDED,
           (("drop_unknown_tone", True),), (("drop_unknown_tone", False),)),
    Family("noisy labels",
           r"labels? (?:are|is|were|may be|might be|could be|can be) (?:\w+ )?(?:wrong|incorrect|noisy|"
           r"unreliable|mistaken|inaccurate|questionable|not (?:always )?(?:right|correct|reliable))"
           r"|mis-?label\w*|mis-?diagnos\w*|wrongly (?:labell?ed|diagnosed)|label(?:ling)? (?:noise|errors?|"
           r"mistakes?)|noisy (?:labels?|annotations?)|wrong (?:labels?|diagnos\w*)"
           r"|diagnos\w* (?:are|is) (?:not always|sometimes|often) (?:right|correct|wrong)",
           (("hp.regularise", "more"),), polar=False),
    # -- the model -------------------------------------------------------------------------------
    Family("simple, explainable model",
           r"keep it simple|simple(?:r|st)? (?:model|approach|method|baseline|pipeline)|something simple|"
           r"interpretab\w*|explainab\w*|(?:can|could|able to) (?:explain|interpret|understand)|"
           r"explain (?:it|the model|its decisions|why)|transparent|easy to (?:explain|understand|interpret)|"
           r"understand why|white[- ]box",
           (("model", "logreg"),)),
    Family("no black box", r"black[- ]box", (("model", "logreg"),), polar=False),
    Family("a deep-learning model",
           r"deep[- ]learning|neural (?:net\w*|model)|deep (?:model|network|net)|"
           r"proper (?:\w+ )?(?:deep|image|vision) model",
           (("model", "neural"),), (("model!", "neural"),)),
    Family("a pretrained network",
           r"pre-?trained|transfer learning|imagenet|state[- ]of[- ]the[- ]art|fine-?tun\w*",
           (("model", "resnet18"),), (("model!", "resnet18"),)),
    Family("overfitting",
           r"over-?fit\w*|memori[sz]\w*|by heart|too (?:complex|flexible)|"
           r"(?:does not|doesn'?t|won'?t|fails? to) generali[sz]e|generali[sz]\w* (?:poorly|badly)|"
           r"gap between (?:training|train) and validation",
           (("hp.regularise", "more"),), polar=False),
    Family("train longer",
           r"train(?:ing)? (?:it |the model )?(?:for )?longer|longer training|more training|"
           r"(?:has|have|had)n'?t (?:yet )?converged|not (?:yet )?converged|under-?fit\w*|"
           r"more (?:iterations|rounds|passes)|(?:give|let) it (?:more time|train)",
           (("hp.longer", "more"),)),
    Family("higher resolution",
           r"higher[- ]resolution|high[- ]resolution|full[- ]resolution|more resolution|larger images|"
           r"bigger images|more pixels|(?:small|tiny|fine|subtle) (?:lesions?|details?|structures?|features?|"
           r"spots?)|details? (?:matter|are important|count)|(?:don'?t|do not) (?:shrink|downsiz\w*|downscal\w*|"
           r"downsampl\w*)",
           (("image_size", "larger"),), polar=False),
    Family("lower resolution",
           r"lower[- ]resolution|low[- ]resolution|smaller images|fewer pixels",
           (("image_size", "smaller"),), (("image_size", "larger"),)),
    # -- which error is worse --------------------------------------------------------------------
    Family("a missed cancer is worse than a false alarm",
           r"(?:miss\w*|overlook\w*|false negatives?)[^.;!?]{0,40}(?:worse|costlier|more costly|"
           r"more (?:serious|dangerous|important))"
           r"|(?:rather|prefer)[^.;!?]{0,50}(?:false (?:alarms?|positives?)|over-?call\w*|biops\w*|refer\w*)"
           r"|than (?:to )?miss\w* (?:a |an |any |the |one )?(?:\w+ )?(?:melanomas?|cancers?|malignan\w*)"
           r"|(?:sensitivity|recall) (?:is |matters )?(?:most|more|first|above all|the priority|a priority)"
           r"|(?:high|higher|maximi[sz]e|maximum|good) (?:sensitivity|recall)"
           r"|(?:don'?t|do not|never|must not|mustn'?t|cannot|can'?t) (?:\w+ )?miss\w* (?:a |any |the |one )?"
           r"(?:\w+ )?(?:melanomas?|cancers?|malignan\w*|bccs?|sccs?|carcinomas?)"
           r"|false negatives? (?:are|is) (?:\w+ )?(?:worse|unacceptable|dangerous)",
           (("fairness", "group_balanced"),), polar=False),
)
