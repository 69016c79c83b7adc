"""Write ``winograd.jsonl`` and ``agreement.jsonl`` from the hand-written schemas below.

The sentences are written for this project. They live here in a compact, readable notation and the JSONL files
are generated from it, so that no character offset is ever typed by hand. Run ``python studies/data/build.py``
after editing a schema; the test suite checks that the shipped files match this script's output.

Resolution notation: ``[it]`` marks the pronoun to resolve and ``{tired|wide}`` the switch (first option, then
second). ``first`` is the answer (0 or 1, an index into the two candidates) of the first option; the second
option has the other answer. Agreement notation: ``{Mary|John}`` marks the antecedent (first option, then
second); ``first`` is the index into ``targets`` of the correct pronoun for the first option.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class R:
    """A resolution schema: a template whose switch flips the pronoun's referent."""

    template: str
    cand0: str
    cand1: str
    first: int = 0


@dataclass(frozen=True)
class A:
    """An agreement schema: a prompt whose antecedent slot flips the correct next pronoun."""

    template: str
    targets: tuple[str, ...]
    first: int
    distractor: str | None = None


GENDER = (" she", " he")
REFLEXIVE = (" herself", " himself")
POSSESSIVE = (" her", " his")

# fmt: off
RESOLUTION: list[R] = [
    # it
    R("The truck passed the bicycle because [it] was much {faster|slower}.", "The truck", "the bicycle"),
    R("The bottle would not go into the bag because [it] was too {tall|full}.", "The bottle", "the bag"),
    R("The hammer cracked the plate because [it] was so {heavy|fragile}.", "The hammer", "the plate"),
    R("The cat could not catch the mouse because [it] was too {slow|quick}.", "The cat", "the mouse"),
    R("The lamp lit up the whole room although [it] was very {dim|large}.", "The lamp", "the whole room"),
    R("The ferry could not cross the river because [it] had {broken down|burst its banks}.", "The ferry",
      "the river"),
    R("The plant grew well in the pot because [it] was {healthy|roomy}.", "The plant", "the pot"),
    R("The van would not fit in the parking space because [it] was too {wide|narrow}.", "The van",
      "the parking space"),
    R("The coat did not keep out the wind because [it] was too {thin|strong}.", "The coat", "the wind"),
    R("The rope could not hold the piano because [it] was too {weak|heavy}.", "The rope", "the piano"),
    R("The knife would not cut the bread because [it] was {blunt|frozen}.", "The knife", "the bread"),
    R("The vase shattered on the floor because [it] was {delicate|hard}.", "The vase", "the floor"),
    R("The river flooded the village because [it] was {swollen|low-lying}.", "The river", "the village"),
    R("The printer could not print the document because [it] was {jammed|corrupted}.", "The printer",
      "the document"),
    R("The laptop could not run the game because [it] was too {old|demanding}.", "The laptop", "the game"),
    R("The key would not turn in the lock because [it] was {bent|frozen shut}.", "The key", "the lock"),
    R("The sun melted the snowman quickly because [it] was so {hot|small}.", "The sun", "the snowman"),
    R("The tree fell on the car because [it] was {rotten|parked underneath}.", "The tree", "the car"),
    R("The shelf could not hold the television because [it] was too {flimsy|heavy}.", "The shelf",
      "the television"),
    R("The computer crashed while running the program because [it] was {outdated|buggy}.", "The computer",
      "the program"),
    R("The medicine did not cure the infection because [it] was {expired|resistant}.", "The medicine",
      "the infection"),
    R("The fire destroyed the cabin because [it] was {fierce|wooden}.", "The fire", "the cabin"),
    R("The wind blew the tent over because [it] was {strong|loosely pegged}.", "The wind", "the tent"),
    R("The train could not stop for the cow because [it] was {going too fast|standing on the tracks}.",
      "The train", "the cow"),
    R("The cat slept on the sofa because [it] was {tired|soft}.", "The cat", "the sofa"),
    R("The bird flew into the window because [it] was {confused|spotless}.", "The bird", "the window"),
    R("The ship hit the iceberg because [it] was {sailing too fast|hidden in the fog}.", "The ship",
      "the iceberg"),
    R("The umbrella did not stop the rain because [it] was {torn|heavy}.", "The umbrella", "the rain"),
    R("The horse jumped over the log because [it] was {agile|small}.", "The horse", "the log"),
    R("The magnet could not lift the coin because [it] was {weak|made of copper}.", "The magnet", "the coin"),
    R("The paint would not stick to the wall because [it] was {old|damp}.", "The paint", "the wall"),
    R("The glue could not mend the vase because [it] was {weak|shattered}.", "The glue", "the vase"),
    R("The candle lit the hall poorly because [it] was {tiny|vast}.", "The candle", "the hall"),
    R("The phone is lighter than the tablet because [it] has a {smaller|bigger} screen.", "The phone",
      "the tablet"),
    R("The statue would not stand on the pedestal because [it] was too {top-heavy|narrow}.", "The statue",
      "the pedestal"),
    R("The engine could not move the boat because [it] was too {weak|big}.", "The engine", "the boat"),
    R("The snake swallowed the egg because [it] was {hungry|small}.", "The snake", "the egg"),
    R("The ladder did not reach the roof because [it] was too {short|high}.", "The ladder", "the roof"),
    R("The sweater shrank in the washing machine because [it] was {woollen|set too hot}.", "The sweater",
      "the washing machine"),
    R("The spider caught the fly because [it] was {patient|careless}.", "The spider", "the fly"),
    R("The dog tried to jump over the fence, but [it] was too {old|high}.", "The dog", "the fence"),
    R("The rabbit tried to outrun the fox, but [it] was {exhausted|faster}.", "The rabbit", "the fox"),
    R("The stone was heavier than the cork, so [it] {sank|floated}.", "The stone", "the cork"),
    R("The bus was slower than the train, so [it] arrived {later|earlier}.", "The bus", "the train"),
    R("The glass was thinner than the mug, so [it] {cracked|survived} in the dishwasher.", "The glass",
      "the mug"),
    R("The jacket was cheaper than the suit, so [it] sold {faster|slower}.", "The jacket", "the suit"),
    R("The puppy chased the wolf although [it] was {tiny|huge}.", "The puppy", "the wolf"),
    R("The cat ignored the mouse although [it] was {starving|within reach}.", "The cat", "the mouse"),
    R("The truck {was pulled by|pulled} the car because [it] had broken down.", "The truck", "the car"),
    R("The book was better than the film because [it] had {more detail|a weak script}.", "The book",
      "the film"),
    R("The boulder crushed the hut because [it] was {enormous|flimsy}.", "The boulder", "the hut"),
    R("The storm damaged the harbour because [it] was {violent|unprotected}.", "The storm", "the harbour"),
    R("The drone could not lift the parcel because [it] was {underpowered|too heavy}.", "The drone",
      "the parcel"),
    # they
    R("The soldiers protected the villagers because [they] were {brave|defenceless}.", "The soldiers",
      "the villagers"),
    R("The teachers praised the students because [they] were {pleased|diligent}.", "The teachers",
      "the students"),
    R("The doctors could not save the patients because [they] were {overworked|too ill}.", "The doctors",
      "the patients"),
    R("The tourists tipped the guides because [they] were {generous|helpful}.", "The tourists", "the guides"),
    R("The guards searched the visitors because [they] were {following orders|carrying bags}.", "The guards",
      "the visitors"),
    R("The parents scolded the children because [they] were {angry|noisy}.", "The parents", "the children"),
    R("The fans cheered the players because [they] were {excited|winning}.", "The fans", "the players"),
    R("The birds ate the berries because [they] were {hungry|ripe}.", "The birds", "the berries"),
    R("The hawks caught the mice because [they] were {fast|slow}.", "The hawks", "the mice"),
    R("The workers asked the managers for a raise because [they] were {underpaid|in charge}.", "The workers",
      "the managers"),
    R("The students thanked the volunteers because [they] were {grateful|kind}.", "The students",
      "the volunteers"),
    R("The kids hid from the dogs because [they] were {scared|barking}.", "The kids", "the dogs"),
    R("The guests praised the cooks because [they] were {delighted|talented}.", "The guests", "the cooks"),
    R("The children ignored the warnings because [they] were {stubborn|unclear}.", "The children",
      "the warnings"),
    R("The tourists could not read the signs because [they] were {foreigners|faded}.", "The tourists",
      "the signs"),
    R("The firefighters rescued the hikers because [they] were {well equipped|trapped}.", "The firefighters",
      "the hikers"),
    R("The nurses calmed the patients because [they] were {experienced|anxious}.", "The nurses",
      "the patients"),
    R("The voters rejected the candidates because [they] were {fed up|corrupt}.", "The voters",
      "the candidates"),
    R("The judges disqualified the runners because [they] were {strict|caught cheating}.", "The judges",
      "the runners"),
    R("The boys tried to beat the men at football, but [they] were too {small|strong}.", "The boys",
      "the men"),
    R("The students respected the teachers although [they] were {rebellious|strict}.", "The students",
      "the teachers"),
    R("The wolves stalked the goats because [they] were {hungry|easy prey}.", "The wolves", "the goats"),
    R("The customers complained to the waiters because [they] were {impatient|rude}.", "The customers",
      "the waiters"),
    R("The apples fell from the branches because [they] were {ripe|bending in the wind}.", "The apples",
      "the branches"),
    R("The lawyers questioned the witnesses because [they] were {thorough|unreliable}.", "The lawyers",
      "the witnesses"),
    R("The farmers sold the tomatoes quickly because [they] {needed money|were fresh}.", "The farmers",
      "the tomatoes"),
    R("The climbers could not reach the huts because [they] were {exhausted|buried in snow}.", "The climbers",
      "the huts"),
    # he
    R("Tom beat Mike at chess because [he] was {smarter|distracted}.", "Tom", "Mike"),
    R("John lent Peter money because [he] was {rich|broke}.", "John", "Peter"),
    R("The coach yelled at the player because [he] was {furious|lazy}.", "The coach", "the player"),
    R("Paul thanked the plumber because [he] was {relieved|quick}.", "Paul", "the plumber"),
    R("Steve envied Adam because [he] was so {insecure|successful}.", "Steve", "Adam"),
    R("Mike helped Jake with the homework because [he] was {good at maths|struggling}.", "Mike", "Jake"),
    R("The king trusted the knight because [he] was {naive|loyal}.", "The king", "the knight"),
    R("Dean lost the race to Felix although [he] had trained {much harder|far less}.", "Dean", "Felix"),
    R("Sam won the argument with Ben although [he] was {wrong|right}.", "Sam", "Ben"),
    R("Leo could not beat Max at chess because [he] was {too young|too clever}.", "Leo", "Max"),
    R("The waiter ignored the man because [he] was {busy|rude}.", "The waiter", "the man"),
    R("Ethan asked Ryan for help because [he] was {stuck|an expert}.", "Ethan", "Ryan"),
    R("The policeman chased the thief because [he] was {on duty|running away}.", "The policeman",
      "the thief"),
    R("Oscar could not hear Felix because [he] was {deaf in one ear|whispering}.", "Oscar", "Felix"),
    R("Henry paid Jacob because [he] had {lost|won} the bet.", "Henry", "Jacob"),
    R("Adam forgave Eric because [he] was {generous|sorry}.", "Adam", "Eric"),
    R("Harry {beat|lost to} George, so [he] celebrated.", "Harry", "George"),
    R("Paul {paid|robbed} Jack, so [he] has less money now.", "Paul", "Jack"),
    R("Carl {apologized to|blamed} Dennis because [he] had started the fight.", "Carl", "Dennis"),
    R("Jack {borrowed money from|lent money to} Oscar because [he] was short of cash.", "Jack", "Oscar"),
    R("Noah {overtook|fell behind} Liam because [he] was faster.", "Noah", "Liam"),
    R("Mike {worked for|hired} Dan because [he] needed a job.", "Mike", "Dan"),
    R("Jack tried to teach Sam to swim, but [he] was {impatient|afraid of water}.", "Jack", "Sam"),
    R("Greg tried to call Victor, but [he] {dialled the wrong number|was asleep}.", "Greg", "Victor"),
    R("Luke is taller than Owen, so [he] sits at the {back|front}.", "Luke", "Owen"),
    R("Ian beat Neil at tennis although [he] was {injured|the favourite}.", "Ian", "Neil"),
    # she
    R("Emma comforted Sarah because [she] was {kind|upset}.", "Emma", "Sarah"),
    R("Laura hired Kate because [she] needed {help|a job}.", "Laura", "Kate"),
    R("Rachel beat Julia at tennis because [she] was {stronger|injured}.", "Rachel", "Julia"),
    R("Olivia asked Grace for directions because [she] was {lost|local}.", "Olivia", "Grace"),
    R("The mother woke the girl because [she] was {worried|late for school}.", "The mother", "the girl"),
    R("Chloe lent Mia an umbrella because [she] had {two|none}.", "Chloe", "Mia"),
    R("Ruth visited Ellen in hospital because [she] was {worried|ill}.", "Ruth", "Ellen"),
    R("Ivy waved at Rose, but [she] {was ignored|did not look up}.", "Ivy", "Rose"),
    R("The queen pardoned the maid because [she] was {merciful|innocent}.", "The queen", "the maid"),
    R("Amber wanted to beat Holly in the race, but [she] was {slower|faster}.", "Amber", "Holly"),
    R("Anna offered Lucy a ride, but [she] {had to cancel|preferred to walk}.", "Anna", "Lucy"),
    R("Lily forgave Paige although [she] was {still hurt|not sorry}.", "Lily", "Paige"),
    R("Maya is older than Jenny, so [she] was born {first|later}.", "Maya", "Jenny"),
    R("Tessa {confessed to|scolded} Fiona because [she] had broken the vase.", "Tessa", "Fiona"),
    R("Grace {taught|learned from} Lily because [she] knew more about painting.", "Grace", "Lily"),
    # him
    R("Kyle shouted at Brandon, so the teacher {punished|comforted} [him].", "Kyle", "Brandon"),
    R("Alex pushed Chris, so the referee gave [him] {a red card|time to recover}.", "Alex", "Chris"),
    R("Jim beat Sam in the final, so the crowd {congratulated|consoled} [him].", "Jim", "Sam"),
    R("The boss promoted Tom instead of Mike because the clients liked [him] {more|less}.", "Tom", "Mike"),
    R("Roy beat Gavin easily, so the club {signed|dropped} [him].", "Roy", "Gavin"),
    R("The man robbed the boy, so the police {arrested|comforted} [him].", "The man", "the boy"),
    R("Jake bullied Sam, so the principal {expelled|protected} [him].", "Jake", "Sam"),
    # her
    R("Lisa tripped Nora, so the coach {benched|comforted} [her].", "Lisa", "Nora"),
    R("Hannah beat Chloe in the debate, so the audience {applauded|pitied} [her].", "Hannah", "Chloe"),
    R("Sophie outsang Megan, so the judges {chose|rejected} [her].", "Sophie", "Megan"),
    R("Kate lent Jill money because [her] {salary had just been paid|rent was due}.", "Kate", "Jill"),
    R("Amy beat Beth at tennis because [her] serve was {stronger|weaker}.", "Amy", "Beth"),
    R("The woman carried the girl because [her] legs were {strong|tired}.", "The woman", "the girl"),
    R("Mia insulted Ella, so the teacher made [her] {apologize|feel better}.", "Mia", "Ella"),
    # his
    R("Toby scored more goals than Marcus because [his] shooting was {better|worse}.", "Toby", "Marcus"),
    R("The man carried the boy because [his] legs were {strong|tired}.", "The man", "the boy"),
    R("Sam beat Joe in the race because [his] shoes were {lighter|heavier}.", "Sam", "Joe"),
    R("Mark hired Luke because [his] {company needed help|references were excellent}.", "Mark", "Luke"),
    R("The father scolded the son because [his] {patience had run out|grades were poor}.", "The father",
      "the son"),
    R("The old farmer sold the young farmer a horse because [his] {barn was full|old horse had died}.",
      "The old farmer", "the young farmer"),
]

AGREEMENT: list[A] = [
    # tag questions, one person
    A("{Emma|Jack} is coming to the party tonight, isn't", GENDER, 0),
    A("{Oliver|Sophie} was late again this morning, wasn't", GENDER, 1),
    A("{Hannah|Daniel} plays the piano beautifully, doesn't", GENDER, 0),
    A("{Henry|Lucy} finished the report on time, didn't", GENDER, 1),
    A("{Chloe|Ethan} has been to Paris before, hasn't", GENDER, 0),
    A("{Samuel|Grace} will be here by six, won't", GENDER, 1),
    A("{Ella|Lucas} can speak three languages, can't", GENDER, 0),
    A("{George|Alice} would never lie to us, would", GENDER, 1),
    A("{Emily|James} isn't feeling well today, is", GENDER, 0),
    A("{Ryan|Katie} loves old movies, doesn't", GENDER, 1),
    A("{Zoe|Max} was born in Scotland, wasn't", GENDER, 0),
    A("{Adam|Megan} is the best cook in town, isn't", GENDER, 1),
    A("{Amelia|Harry} had already eaten, hadn't", GENDER, 0),
    A("{Jake|Ruby} doesn't like spicy food, does", GENDER, 1),
    A("{Laura|Peter} should call the doctor, shouldn't", GENDER, 0),
    A("{Michael|Jessica} was a teacher for thirty years, wasn't", GENDER, 1),
    A("{Rebecca|Charles} never forgets a birthday, does", GENDER, 0),
    A("So {Kevin|Maria} is a really good neighbour, isn't", GENDER, 1),
    # X said that, one person
    A("{Emily|James} called the office this morning and said that", GENDER, 0),
    A("When the phone rang, {David|Sarah} picked it up and said that", GENDER, 1),
    A("After the meeting, {Olivia|Thomas} told everyone that", GENDER, 0),
    A("{Mark|Anna} wrote in the email that", GENDER, 1),
    A("{Rachel|Paul} explained in a long letter that", GENDER, 0),
    A("{Kevin|Natalie} promised on the phone that", GENDER, 1),
    A("{Helen|Frank} finally admitted that", GENDER, 0),
    A("{Simon|Julia} was worried because", GENDER, 1),
    A("{Isabel|Martin} insisted that", GENDER, 0),
    A("{Steven|Claire} announced at dinner that", GENDER, 1),
    A("{Fiona|Gary} complained loudly that", GENDER, 0),
    A("{Richard|Victoria} told us that", GENDER, 1),
    A("{Diana|Edward} said in the interview that", GENDER, 0),
    A("{Noah|Lily} whispered to us that", GENDER, 1),
    # possessives, one person
    A("This morning {Kate|Tom} lost", POSSESSIVE, 0),
    A("{Leo|Mia} yawned and rubbed", POSSESSIVE, 1),
    A("{Alice|Oscar} stood at the mirror and brushed", POSSESSIVE, 0),
    A("Before the trip, {Carl|Ruth} packed", POSSESSIVE, 1),
    A("{Lucy|Sam} came in from the garden and washed", POSSESSIVE, 0),
    A("{Paul|Helen} parked outside the shop and locked", POSSESSIVE, 1),
    A("{Amy|Ben} was late because of a flat tyre on", POSSESSIVE, 0),
    A("It was cold outside, so {Luke|Jane} put on", POSSESSIVE, 1),
    A("{Laura|Owen} moved to the city and sold", POSSESSIVE, 0),
    A("{Dean|Holly} knew the answer and raised", POSSESSIVE, 1),
    A("{Sophie|Aaron} did not agree and shook", POSSESSIVE, 0),
    A("{Felix|Clara} spent the whole evening reading", POSSESSIVE, 1),
    A("Every morning {Eva|Liam} combs", POSSESSIVE, 0),
    A("{Ian|Nina} sat down at the desk and opened", POSSESSIVE, 1),
    A("After the long walk, {Grace|Jacob} took off", POSSESSIVE, 0),
    # role nouns
    A("{The queen|The king} waved to the crowd from", POSSESSIVE, 0),
    A("{My father|My mother} always said that", GENDER, 1),
    A("{The bride|The groom} was very nervous, wasn't", GENDER, 0),
    A("On the opening night, {the actor|the actress} forgot", POSSESSIVE, 1),
    A("{The girl|The boy} fell off", POSSESSIVE, 0),
    A("{My uncle|My aunt} is visiting next week, isn't", GENDER, 1),
    A("{The waitress|The waiter} dropped the plates and apologized because", GENDER, 0),
    A("{The policeman|The policewoman} stopped the car and took out", POSSESSIVE, 1),
    A("After lunch, {Grandma|Grandpa} fell asleep in", POSSESSIVE, 0),
    A("{The prince|The princess} looked out of", POSSESSIVE, 1),
    A("{The old woman|The old man} found the letter and put on", POSSESSIVE, 0),
    A("{The father|The mother} came home from work and hung up", POSSESSIVE, 1),
    A("{The nun|The monk} knelt down and closed", POSSESSIVE, 0),
    A("{Mr. Brown|Mrs. Brown} is a very strict teacher, isn't", GENDER, 1),
    # number
    A("{The boys|The boy} played really well yesterday, didn't", (" they", " he"), 0),
    A("{The girl|The girls} will be here soon, won't", (" they", " she"), 1),
    A("{The boxes|The box} fell off the shelf, didn't", (" they", " it"), 0),
    A("{My sister|My sisters} lost", (" their", " her"), 1),
    A("{The brothers|The brother} sold", (" their", " his"), 0),
    A("{The car|The cars} had broken down, hadn't", (" they", " it"), 1),
    A("{The dogs|The dog} barked all night, didn't", (" they", " it"), 0),
    A("{The man|The men} could not open", (" their", " his"), 1),
    A("{The women|The woman} said that", (" they", " she"), 0),
    A("{The tree|The trees} lost", (" their", " its"), 1),
    A("{The birds|The bird} built", (" their", " its"), 0),
    A("{The computer|The computers} crashed again, didn't", (" they", " it"), 1),
    A("{The kittens|The kitten} drank", (" their", " its"), 0),
    A("{Anna|Anna and Lucy} will come to dinner, won't", (" they", " she"), 1),
    A("{The men|The man} who fixed the roof said that", (" they", " he"), 0),
    # two people, tag question on the antecedent's clause
    A("When Tom arrived, {Mary|Paul} was already asleep, wasn't", GENDER, 0, "Tom"),
    A("Although Anna asked nicely, {James|Lucy} refused to help, didn't", GENDER, 1, "Anna"),
    A("{Sarah|David}, who lives next to Mike, is a nurse, isn't", GENDER, 0, "Mike"),
    A("After Alan left the room, {Jack|Emma} started to cry, didn't", GENDER, 1, "Alan"),
    A("{Rachel|Simon} beat Tom at chess yesterday, didn't", GENDER, 0, "Tom"),
    A("{Frank|Helen} has known Lisa for years, hasn't", GENDER, 1, "Lisa"),
    A("{Amy|Ryan} will drive Jacob to the airport, won't", GENDER, 0, "Jacob"),
    A("{Owen|Claire} can teach Sophie to swim, can't", GENDER, 1, "Sophie"),
    A("{Lily|Ethan} sent Rose a birthday card, didn't", GENDER, 0, "Rose"),
    A("Since Martin was busy, {Harry|Megan} cooked dinner, didn't", GENDER, 1, "Martin"),
    A("Even though Paul is older, {Chloe|Noah} is taller, isn't", GENDER, 0, "Paul"),
    A("{Adam|Grace}, whom Mark met in Rome, is coming tonight, isn't", GENDER, 1, "Mark"),
    A("Because Susan was sick, {Alice|Henry} gave the speech, didn't", GENDER, 0, "Susan"),
    A("{William|Victoria} was talking to Ben on the phone, wasn't", GENDER, 1, "Ben"),
    A("{Hannah|Jacob} is much older than Emily, isn't", GENDER, 0, "Emily"),
    A("If Jack calls, {Daniel|Sophie} will answer the phone, won't", GENDER, 1, "Jack"),
    A("{Julia|Matthew} told Tom the whole story, didn't", GENDER, 0, "Tom"),
    A("{Thomas|Emily} has never met Laura, has", GENDER, 1, "Laura"),
    A("Ever since Mike moved away, {Anna|George} has been lonely, hasn't", GENDER, 0, "Mike"),
    A("{Samuel|Olivia} borrowed Kevin's bike last week, didn't", GENDER, 1, "Kevin"),
    A("While Linda was at work, {Diana|Oscar} painted the kitchen, didn't", GENDER, 0, "Linda"),
    A("{Patrick|Natalie} works with Steve at the bank, doesn't", GENDER, 1, "Steve"),
    A("{Ellie|Lucas} was the one who called Amy, wasn't", GENDER, 0, "Amy"),
    A("{Edward|Molly} hardly knows Charlotte, does", GENDER, 1, "Charlotte"),
    A("Once Brian had finished, {Jessica|Robert} started to sing, didn't", GENDER, 0, "Brian"),
    A("{Joseph|Abigail} should apologize to Nick, shouldn't", GENDER, 1, "Nick"),
    A("{Isabella|Andrew} could see Sam from the window, couldn't", GENDER, 0, "Sam"),
    A("{The man|The woman} who interviewed Kate was very friendly, wasn't", GENDER, 1, "Kate"),
    # two people, reflexive bound inside the antecedent's clause
    A("Tom watched {Mary|Paul} hurt", REFLEXIVE, 0, "Tom"),
    A("Emma heard {Peter|Kate} introduce", REFLEXIVE, 1, "Emma"),
    A("Jack told {Sarah|Harry} to behave", REFLEXIVE, 0, "Jack"),
    A("Anna asked {Jacob|Lucy} to describe", REFLEXIVE, 1, "Anna"),
    A("Steve reminded {Rose|Adam} to look after", REFLEXIVE, 0, "Steve"),
    A("Lisa begged {Mark|Julia} to take care of", REFLEXIVE, 1, "Lisa"),
    A("Kevin saw {Ellen|Oliver} cut", REFLEXIVE, 0, "Kevin"),
    A("Sophie let {David|Emma} pour", REFLEXIVE, 1, "Sophie"),
    A("Greg encouraged {Maria|Jim} to believe in", REFLEXIVE, 0, "Greg"),
    A("Grace wanted {Peter|Rose} to be proud of", REFLEXIVE, 1, "Grace"),
    A("James helped {Laura|Oscar} to free", REFLEXIVE, 0, "James"),
    A("Ruth expected {Adam|Sarah} to defend", REFLEXIVE, 1, "Ruth"),
    A("Daniel forced {Julia|Henry} to look at", REFLEXIVE, 0, "Daniel"),
    A("Emily allowed {Jack|Ella} to treat", REFLEXIVE, 1, "Emily"),
    A("Tom persuaded {Lucy|Mike} to enter", REFLEXIVE, 0, "Tom"),
    A("Hannah noticed {Ben|Chloe} looking at", REFLEXIVE, 1, "Hannah"),
]
# fmt: on

_SLOT = re.compile(r"\{([^{}|]+)\|([^{}|]+)\}")
_PRONOUN = re.compile(r"\[([^\[\]]+)\]")


def _word_at(text: str, start: int, word: str) -> bool:
    """Whether ``word`` sits at ``start`` in ``text`` with no letter or digit glued to either side."""
    end = start + len(word)
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    return text[start:end] == word and not before.isalnum() and not after.isalnum()


def _find_word(text: str, word: str, limit: int) -> int:
    """Offset of the first whole-word ``word`` in ``text`` that ends before ``limit``."""
    start = text.find(word)
    while start != -1 and start + len(word) <= limit:
        if _word_at(text, start, word):
            return start
        start = text.find(word, start + 1)
    raise ValueError(f"{word!r} does not occur as a whole word before offset {limit} in {text!r}")


def _one_slot(template: str) -> re.Match[str]:
    slots = list(_SLOT.finditer(template))
    if len(slots) != 1:
        raise ValueError(f"expected exactly one {{a|b}} slot, found {len(slots)} in {template!r}")
    return slots[0]


def resolution_rows(schemas: list[R]) -> list[dict]:
    """Expand each resolution schema into its two twin rows, offsets computed from the text."""
    rows = []
    for index, schema in enumerate(schemas, start=1):
        slot = _one_slot(schema.template)
        schema_id = f"wg-{index:03d}"
        options = [(slot.group(1), schema.first), (slot.group(2), 1 - schema.first)]
        if index % 2 == 0:  # alternate, so that twin "a" is not always the first option
            options.reverse()
        for suffix, (switch, answer) in zip("ab", options, strict=True):
            text = schema.template[: slot.start()] + switch + schema.template[slot.end() :]
            marks = list(_PRONOUN.finditer(text))
            if len(marks) != 1:
                raise ValueError(f"expected exactly one [pronoun] mark in {schema.template!r}")
            mark = marks[0]
            sentence = text[: mark.start()] + mark.group(1) + text[mark.end() :]
            pronoun_offset = mark.start()
            switch_offset = slot.start() - (2 if slot.start() > mark.start() else 0)
            candidates = [schema.cand0, schema.cand1]
            rows.append(
                {
                    "id": f"{schema_id}{suffix}",
                    "schema_id": schema_id,
                    "twin_id": f"{schema_id}{'b' if suffix == 'a' else 'a'}",
                    "sentence": sentence,
                    "pronoun": mark.group(1),
                    "pronoun_char_offset": pronoun_offset,
                    "candidates": candidates,
                    "candidate_char_offsets": [_find_word(sentence, c, pronoun_offset) for c in candidates],
                    "answer": answer,
                    "switch_word": switch,
                    "switch_char_offset": switch_offset,
                }
            )
    return rows


def agreement_rows(schemas: list[A]) -> list[dict]:
    """Expand each agreement schema into its two twin rows, offsets computed from the text."""
    rows = []
    for index, schema in enumerate(schemas, start=1):
        slot = _one_slot(schema.template)
        schema_id = f"ag-{index:03d}"
        options = [(slot.group(1), schema.first), (slot.group(2), 1 - schema.first)]
        for suffix, (antecedent, answer) in zip("ab", options, strict=True):
            prompt = schema.template[: slot.start()] + antecedent + schema.template[slot.end() :]
            distractor_offset = None
            if schema.distractor is not None:
                distractor_offset = _find_word(prompt, schema.distractor, len(prompt))
            rows.append(
                {
                    "id": f"{schema_id}{suffix}",
                    "schema_id": schema_id,
                    "twin_id": f"{schema_id}{'b' if suffix == 'a' else 'a'}",
                    "prompt": prompt,
                    "targets": list(schema.targets),
                    "answer": answer,
                    "antecedent": antecedent,
                    "antecedent_char_offset": slot.start(),
                    "distractor": schema.distractor,
                    "distractor_char_offset": distractor_offset,
                }
            )
    return rows


def render(rows: list[dict]) -> str:
    """One JSON object per line, keys in a fixed order, UTF-8 kept as is."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def main(out_dir: Path = HERE) -> None:
    """Write both files into ``out_dir``."""
    (out_dir / "winograd.jsonl").write_text(render(resolution_rows(RESOLUTION)), encoding="utf-8")
    (out_dir / "agreement.jsonl").write_text(render(agreement_rows(AGREEMENT)), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
